#pragma once
// What every mode of `llmctl run` shares (single prompt, --batch, -i): the options, the
// loaded model with its tokenizer, the backend and the forward pass, and the memory line.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "cli/standard_output.h"
#include "cli/engine_options.h"
#include "model/forward.h"
#include "model/generate.h"
#include "model/model_loader.h"
#include "sampler/sampler.h"
#include "tokenizer/tokenizer.h"

namespace llmctl::cli {

// The engine's options (-m, -t, --device, -c, --kv-type, -b ...: engine_options.h) and run's own.
struct RunOptions : EngineOptions {
  std::string prompt;
  std::string file;
  int64_t n_predict = 128;
  SamplerParams sampling;          // seed filled in at run time
  std::optional<uint64_t> seed;    // --seed; absent: a random seed, printed
  std::vector<std::string> stops;  // --stop
  int64_t block_size = 16;
  int64_t parallel = 4;      // sequences decoded together (--batch)
  bool ignore_eos = false;
  bool echo = false;
  bool no_bos = false;
  std::string pre_tokenizer;      // --pre-tokenizer NAME
  bool no_parse_special = false;  // --no-parse-special: "<|im_start|>" in a prompt stays text
  bool json = false;
  std::string logits_out;
  std::string batch_file;  // --batch
  std::string resume;      // --resume
  std::string shard;       // --shard K/N (batch_shard.h)
  std::vector<std::string> merge;  // --merge SHARD_OUTPUT...: merge instead of generating
  bool interactive = false;
  std::string chat_template;       // --chat-template NAME (built-in)
  std::string chat_template_file;  // --chat-template-file FILE.jinja
  std::string system;              // --system: -i's system message
  bool has_prompt = false;
  bool verify = false;          // --verify: scan every weight for NaN/Inf before running
  // Diagnostics, per prompt, --batch request or -i turn (run_diagnostics.h): attention
  // statistics (diag/attn_stats.h), with an alert threshold on the scaled score max only when
  // --attn-alert is given (NaN/Inf always alert), the autocorrelation report (diag/acf.h) and
  // the router statistics of a mixture-of-experts model (diag/moe_stats.h).
  bool attn_stats = false;
  std::optional<double> attn_alert;
  bool acf = false;
  bool stop_on_loop = false;
  bool moe_stats = false;  // --moe-stats: router statistics (diag/moe_stats.h), MoE models only
};

// The model, its tokenizer and a forward pass on the chosen backend.
struct RunSession {
  LoadedModel model;  // GGUF file or Hugging Face directory
  std::optional<Tokenizer> tok;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Forward> fwd;
  int64_t n_ctx = 0;  // positions per sequence
  double load_ms = 0;
};

// Checks the options that CLI11 cannot (throws CLI::ValidationError).
void check_run_options(const RunOptions& opt);
// Loads everything for n_sequences sequences of n_ctx positions each and prints the memory
// line on stderr. Throws Error for a missing model (with how to fetch the default one) or one
// without a vocabulary.
RunSession open_run_session(const RunOptions& opt, int64_t n_sequences);
// The GenerateOptions every mode starts from: the context, -n, EOS and `end_ids` (a chat
// template's end-of-turn ids), --ignore-eos (which passes both) and Ctrl-C.
GenerateOptions base_generate_options(const RunOptions& opt, const RunSession& s,
                                      const std::vector<int32_t>& end_ids = {});
// The sampler parameters with the seed resolved (--seed, or a random one).
SamplerParams resolved_sampling(const RunOptions& opt);
// The exit code after generation: 0, kExitInterrupted after Ctrl-C, or kExitError (with a
// message) when a write to stdout failed other than by its reader going away
// (standard_output.h, which also has write_out).
int finish_exit_code();

// The three modes.
int run_single(const RunOptions& opt);
int run_batch(const RunOptions& opt);
int run_chat(const RunOptions& opt);
// --merge: the records of --shard outputs as one run's (run_merge.cpp); loads no model.
int run_merge(const RunOptions& opt);

}  // namespace llmctl::cli
