// Loading and checks shared by the modes of `llmctl run` (run_session.h).
#include "cli/run_session.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <utility>

#include "backend/selection.h"
#include "cli/batch_shard.h"
#include "cli/interrupt.h"
#include "cli/model_tokenizer.h"
#include "cli/standard_output.h"
#include "core/byte_size.h"
#include "core/error.h"
#include "model/verify_weights.h"

namespace llmctl::cli {

void check_run_options(const RunOptions& opt) {
  try {
    validate_sampler_params(opt.sampling);
  } catch (const Error& e) {
    throw CLI::ValidationError("sampling", e.what());
  }
  for (const std::string& s : opt.stops)
    if (s.empty()) throw CLI::ValidationError("--stop", "a stop string cannot be empty");
  const int modes = (opt.interactive ? 1 : 0) + (opt.batch_file.empty() ? 0 : 1);
  if (modes > 1) throw CLI::ValidationError("-i", "-i and --batch cannot be combined");
  if (!opt.resume.empty() && opt.batch_file.empty())
    throw CLI::ValidationError("--resume", "--resume needs --batch");
  if (!opt.shard.empty()) {
    if (opt.batch_file.empty()) throw CLI::ValidationError("--shard", "--shard needs --batch");
    try {
      parse_batch_shard(opt.shard);
    } catch (const Error& e) {
      throw CLI::ValidationError(e.what());  // it names --shard
    }
  }
  if (!opt.merge.empty() && (opt.interactive || !opt.resume.empty() || !opt.shard.empty() ||
                             opt.has_prompt || !opt.file.empty() || !opt.logits_out.empty()))
    throw CLI::ValidationError("--merge",
                               "--merge combines shard outputs; it takes no prompt, -i, --resume, "
                               "--shard or --logits-out (--batch IN checks that every line of IN "
                               "has its record)");
  if (!opt.logits_out.empty() && modes > 0)
    throw CLI::ValidationError("--logits-out", "--logits-out works with a single prompt only");
  if (opt.attn_alert && !std::isfinite(*opt.attn_alert))
    throw CLI::ValidationError(
        "--attn-alert", fmt::format("--attn-alert {} is not a finite number (a scaled attention "
                                    "score such as 30)",
                                    *opt.attn_alert));
}

SamplerParams resolved_sampling(const RunOptions& opt) {
  SamplerParams sp = opt.sampling;
  if (opt.seed) {
    sp.seed = *opt.seed;
  } else {
    std::random_device rd;
    sp.seed = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }
  return sp;
}

GenerateOptions base_generate_options(const RunOptions& opt, const RunSession& s,
                                      const std::vector<int32_t>& end_ids) {
  GenerateOptions g;
  g.n_ctx = s.n_ctx;
  g.n_predict = opt.n_predict;
  g.eos_id = s.tok->eos_id();
  g.ignore_eos = opt.ignore_eos;
  // --ignore-eos passes a chat template's end of turn too (its EOS is one of them), so an
  // answer runs to -n in every mode.
  if (!opt.ignore_eos) g.end_ids = end_ids;
  g.interrupted = [] { return interrupted(); };
  return g;
}

int finish_exit_code() {
  // A failed write to stdout stopped generation too (interrupt.h): finish_stdout says why, or
  // stays quiet when the reader went away.
  return finish_stdout(interrupted() && !output_closed() ? kExitInterrupted : kExitOk);
}

RunSession open_run_session(const RunOptions& opt, int64_t n_sequences) {
  install_interrupt_handler();
  require_model_path(opt.model);
  using Clock = std::chrono::steady_clock;
  const Clock::time_point t0 = Clock::now();
  RunSession s;
  s.model = load_model(opt.model);
  if (opt.verify) verify_model_weights(s.model);
  const ModelConfig& config = s.model.config;
  // Before anything runs: a report that cannot exist is an error, not an empty table.
  if (opt.moe_stats && config.n_experts == 0)
    throw Error(fmt::format("--moe-stats: {} ({}) has no experts: every layer runs one dense FFN, "
                            "so there is no router to report on",
                            opt.model, config.arch),
                "--moe-stats is for mixture-of-experts models (Mixtral, Qwen2-MoE, Qwen3-MoE); "
                "drop it for this model");
  s.tok = open_model_tokenizer(s.model, TokenizerOptions{opt.pre_tokenizer});
  if (!s.tok)
    throw FileError(opt.model, "no vocabulary: the directory has no tokenizer.model",
                    FileError::kNoOffset,
                    "llmctl reads sentencepiece tokenizer.model files; convert the model to GGUF "
                    "with its vocabulary");
  // A vocabulary larger than the embedding would produce ids the model cannot embed; a smaller
  // one (padded embedding rows) is legitimate.
  if (s.tok->n_vocab() > config.n_vocab)
    throw FileError(opt.model,
                    fmt::format("the vocabulary has {} tokens but the model embeds only {} "
                                "(token_embd rows)",
                                s.tok->n_vocab(), config.n_vocab),
                    FileError::kNoOffset, "the tokenizer does not belong to this model");
  s.n_ctx = opt.ctx_size.value_or(config.n_ctx_train);

  s.backend = make_backend(backend_choice(opt, opt.threads));

  ForwardOptions fo;
  fo.max_batch_tokens = std::max<int64_t>(1, std::min(opt.batch_size, s.n_ctx * n_sequences));
  fo.kv.block_size = opt.block_size;
  apply_kv_types(opt, fo.kv);
  const int64_t blocks_per_seq = (s.n_ctx + opt.block_size - 1) / opt.block_size;
  fo.kv.n_blocks = blocks_per_seq * n_sequences;
  fo.kv.max_sequences = n_sequences;  // windowed layers' pools: that many windows (kv_cache.h)
  // An explicit -c that the host cannot hold is refused with the amount. The default (the
  // training context) is not: CPU pools are mapped lazily, so an unused long context costs
  // address space only.
  if (opt.ctx_size && std::string(s.backend->name()) == "cpu")
    fo.kv.max_bytes = host_kv_memory_limit();
  s.fwd = std::make_unique<Forward>(config, s.model.weights, *s.backend, fo);
  // The weights' one-time preparation for the kernels (the CPU's repacked records and huge-page
  // copies) belongs to loading, as llama.cpp repacks at load: done at the first matmul instead,
  // it fell in the prompt's timing (1B Q4_K_M, 402 tokens, two threads: 115 to 119 prompt
  // tokens/s against 151 to 203 with it here; BENCHMARKS.md, 2026-12-07 (later)) and, for a mixture
  // of experts, in whichever later request first met an expert.
  const Clock::time_point t_prepare = Clock::now();
  s.fwd->prepare_matmuls();
  const double prepare_s = std::chrono::duration<double>(Clock::now() - t_prepare).count();
  s.load_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();

  const uint64_t weight_bytes = weight_stats(s.model.weights).bytes;
  // Windowed layers keep only their window (kv_cache.h): say how many positions they hold.
  const PagedKvCache& cache = s.fwd->cache();
  std::string windows;
  for (int g = 1; g < cache.n_groups(); ++g)
    windows += fmt::format("; {} layers windowed to {}: {} positions", cache.group_layers(g),
                           cache.group_window(g), cache.n_blocks(g) * cache.block_size());
  fmt::print(stderr,
             "llmctl: {} ({}, {} layers, n_embd {}, n_vocab {}) on {}, {} thread{}; memory: "
             "weights {} mapped, KV cache {} ({} x {} positions{}, {}, blocks of {}), scratch {}\n",
             opt.model, config.arch, config.n_layers, config.n_embd, config.n_vocab,
             s.backend->name(), s.backend->n_threads(), s.backend->n_threads() == 1 ? "" : "s",
             format_bytes(weight_bytes), format_bytes(cache.bytes()), n_sequences, s.n_ctx, windows,
             kv_types_label(fo.kv), opt.block_size, format_bytes(s.fwd->scratch_bytes()));
  if (const uint64_t prepared = s.backend->prepared_weight_bytes(); prepared > 0)
    fmt::print(stderr,
               "llmctl: weights prepared for the kernels: {} repacked or copied in {:.2f} s (part "
               "of load_ms)\n",
               format_bytes(prepared), prepare_s);
  if (s.n_ctx > config.n_ctx_train)
    fmt::print(stderr, "llmctl: note: -c {} exceeds the model's training context {}\n", s.n_ctx,
               config.n_ctx_train);
  return s;
}

}  // namespace llmctl::cli
