// llmctl run: generation on the CPU backend (sampler from src/sampler), streamed to stdout,
// timed on stderr.
//
// Output contract (scripts rely on it):
//   stdout  the generated text only (with --echo, the prompt first), flushed after every
//           token, no newline added unless stdout is a terminal; with --json, one JSON object
//           instead: {prompt_ids, generated_ids, text, finish_reason, n_ctx, timings{...}}.
//   stderr  one memory line at load, notes, a human timing line, and last of all ONE summary
//           line of space-separated key=value pairs:
//     llmctl-run: load_ms=F prompt_tokens=N gen_tokens=N ttft_ms=F prefill_tok_s=F
//                 decode_tok_s=F p50_ms=F p95_ms=F finish=eos|length|n_predict|stop seed=N
//                 logits_hash=<16 hex digits, fnv1a-64 of the last logits' float32 bytes>
//     p50/p95: nearest-rank percentiles of the per-token decode latency (forward step + pick).
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <random>

#include "backend/cpu/cpu_backend.h"
#include "cli/app.h"
#include "core/error.h"
#include "core/text_io.h"
#include "io/gguf.h"
#include "model/config.h"
#include "model/forward.h"
#include "model/generate.h"
#include "model/weights.h"
#include "sampler/sampler.h"
#include "sampler/stop.h"
#include "tokenizer/tokenizer.h"

namespace llmctl::cli {

namespace {

constexpr const char* kDefaultModel = "models/stories260K.gguf";

struct RunOptions {
  std::string model = kDefaultModel;
  std::string prompt;
  std::string file;
  int64_t n_predict = 128;
  SamplerParams sampling;              // seed filled in at run time
  std::optional<uint64_t> seed;        // --seed; absent: a random seed, printed
  std::vector<std::string> stops;      // --stop
  std::optional<int64_t> ctx_size;
  int threads = 1;
  bool ignore_eos = false;
  bool echo = false;
  bool no_bos = false;
  bool json = false;
  std::string logits_out;
  bool has_prompt = false;
};

using Clock = std::chrono::steady_clock;

std::string human_bytes(uint64_t n) {
  const auto x = static_cast<double>(n);
  if (n >= (1ULL << 30)) return fmt::format("{:.2f} GiB", x / static_cast<double>(1ULL << 30));
  if (n >= (1ULL << 20)) return fmt::format("{:.2f} MiB", x / static_cast<double>(1ULL << 20));
  if (n >= (1ULL << 10)) return fmt::format("{:.1f} KiB", x / static_cast<double>(1ULL << 10));
  return fmt::format("{} B", n);
}

std::string prompt_text(const RunOptions& opt) {
  if (opt.has_prompt && !opt.file.empty())
    throw CLI::ValidationError("-p and -f", "give the prompt either with -p or with -f, not both");
  if (opt.has_prompt) return opt.prompt;
  if (!opt.file.empty()) return read_whole_file(opt.file);
  if (stdin_is_terminal())
    throw CLI::ValidationError(
        "-p", "no prompt given: pass -p TEXT, -f FILE, or pipe the prompt on stdin");
  return read_whole_file("-");
}

void check_options(const RunOptions& opt) {
  try {
    validate_sampler_params(opt.sampling);
  } catch (const Error& e) {
    throw CLI::ValidationError("sampling", e.what());
  }
  for (const std::string& s : opt.stops)
    if (s.empty()) throw CLI::ValidationError("--stop", "a stop string cannot be empty");
  if (opt.ctx_size && *opt.ctx_size < 1)
    throw CLI::ValidationError("-c", fmt::format("--ctx-size {} must be >= 1", *opt.ctx_size));
  if (opt.threads < 1) throw CLI::ValidationError("-t", "--threads must be >= 1");
}

// --logits-out: rows of n_vocab float32, little-endian whatever the host.
class LogitsWriter {
 public:
  explicit LogitsWriter(const std::string& path) : path_(path), out_(path, std::ios::binary) {
    if (!out_) throw FileError(path, "cannot open for writing");
  }
  void write(const std::vector<float>& row) {
    bytes_.resize(row.size() * 4);
    for (size_t i = 0; i < row.size(); ++i) {
      uint32_t u = 0;
      std::memcpy(&u, &row[i], 4);
      for (size_t b = 0; b < 4; ++b) bytes_[i * 4 + b] = static_cast<char>((u >> (8 * b)) & 0xFFu);
    }
    out_.write(bytes_.data(), static_cast<std::streamsize>(bytes_.size()));
  }
  void close() {
    out_.close();
    if (!out_) throw FileError(path_, "write failed");
  }

 private:
  std::string path_;
  std::ofstream out_;
  std::vector<char> bytes_;
};

void write_out(const std::string& s) {
  if (s.empty()) return;
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fflush(stdout);
}

int run_run(const RunOptions& opt) {
  check_options(opt);
  if (!std::filesystem::exists(opt.model))
    throw Error(
        fmt::format("{}: no such model file", opt.model),
        fmt::format("fetch the default model with scripts/fetch-models.sh (it writes {}), "
                    "or pass -m MODEL.gguf",
                    kDefaultModel));
  const std::string text = prompt_text(opt);

  // ---- load ----------------------------------------------------------------------------
  const Clock::time_point t_load = Clock::now();
  const GgufFile file = GgufFile::open(opt.model);
  const ModelConfig config = config_from_gguf(file);
  const ModelWeights weights = bind_weights(file, config);
  const Tokenizer tok = Tokenizer::from_gguf(file);
  const int64_t n_ctx = opt.ctx_size.value_or(config.n_ctx_train);
  cpu::CpuBackend backend;
  Forward fwd(config, weights, backend, n_ctx);
  const double load_ms = std::chrono::duration<double, std::milli>(Clock::now() - t_load).count();

  uint64_t weight_bytes = 0;
  for (const GgufTensorInfo& t : file.tensors()) weight_bytes += t.n_bytes;
  fmt::print(
      stderr,
      "llmctl: {} ({}, {} layers, n_embd {}, n_vocab {}) on {}, 1 thread; memory: weights {} "
      "mapped, KV cache {} (n_ctx {}, f32), scratch {}\n",
      opt.model, config.arch, config.n_layers, config.n_embd, config.n_vocab, backend.name(),
      human_bytes(weight_bytes), human_bytes(kv_cache_bytes(config, n_ctx)), n_ctx,
      human_bytes(forward_scratch_bytes(config)));
  if (n_ctx > config.n_ctx_train)
    fmt::print(stderr, "llmctl: note: -c {} exceeds the model's training context {}\n", n_ctx,
               config.n_ctx_train);

  const bool add_bos = !opt.no_bos && tok.add_bos_default();
  const std::vector<int32_t> prompt_ids = tok.encode(text, add_bos);

  // ---- generate --------------------------------------------------------------------------
  StreamDecoder stream(tok);
  std::string generated_text;  // for --json
  std::optional<LogitsWriter> logits_out;
  if (!opt.logits_out.empty()) logits_out.emplace(opt.logits_out);
  if (opt.echo && !opt.json) {
    // Through the same decoder, so the continuation keeps its leading space after the prompt.
    for (const int32_t id : prompt_ids) write_out(stream.push(id));
  }

  SamplerParams sp = opt.sampling;
  sp.seed = opt.seed ? *opt.seed : (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  Sampler sampler(sp);
  for (const int32_t id : prompt_ids) sampler.accept(id);  // penalties see the prompt, as llama.cpp's
  StopMatcher stop(opt.stops);
  auto emit = [&](const std::string& s) {
    if (opt.json)
      generated_text += s;
    else
      write_out(s);
  };

  GenerateOptions g;
  g.n_ctx = n_ctx;
  g.n_predict = opt.n_predict;
  g.eos_id = tok.eos_id();
  g.ignore_eos = opt.ignore_eos;
  g.pick = [&sampler](const float* logits, int32_t n_vocab) {
    const int32_t id = sampler.sample(logits, n_vocab);
    sampler.accept(id);
    return id;
  };
  if (logits_out)
    g.on_prompt_logits = [&](int64_t, const std::vector<float>& row) { logits_out->write(row); };
  g.on_token = [&](int32_t id) { emit(stop.push(stream.push(id)).text); };
  g.stop_requested = [&stop] { return stop.stopped(); };
  const GenerateResult r = generate(
      [&fwd](int32_t id) -> const std::vector<float>& { return fwd.step(id); }, prompt_ids, g);
  if (!stop.stopped()) {
    emit(stop.push(stream.flush()).text);
    emit(stop.flush());
  }
  if (logits_out) logits_out->close();

  // ---- report ----------------------------------------------------------------------------
  const auto n_gen = static_cast<int64_t>(r.generated_ids.size());
  const double decode_ms = std::accumulate(r.decode_ms.begin(), r.decode_ms.end(), 0.0);
  const double prefill_tok_s =
      r.prefill_ms > 0 ? static_cast<double>(r.n_prompt) * 1000.0 / r.prefill_ms : 0.0;
  const double decode_tok_s =
      decode_ms > 0 ? static_cast<double>(r.decode_ms.size()) * 1000.0 / decode_ms : 0.0;
  const double p50 = percentile(r.decode_ms, 50.0);
  const double p95 = percentile(r.decode_ms, 95.0);
  const char* finish = finish_reason_name(r.finish);
  const std::string hash = fmt::format("{:016x}", r.last_logits_hash);

  if (opt.json) {
    const nlohmann::json j{{"model", opt.model},
                           {"prompt_ids", prompt_ids},
                           {"generated_ids", r.generated_ids},
                           {"text", generated_text},
                           {"finish_reason", finish},
                           {"n_ctx", n_ctx},
                           {"seed", sp.seed},
                           {"timings",
                            {{"load_ms", load_ms},
                             {"prefill_ms", r.prefill_ms},
                             {"ttft_ms", r.ttft_ms},
                             {"decode_ms", decode_ms},
                             {"prefill_tok_s", prefill_tok_s},
                             {"decode_tok_s", decode_tok_s},
                             {"p50_ms", p50},
                             {"p95_ms", p95}}},
                           {"logits_hash", hash}};
    fmt::print("{}\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    std::fflush(stdout);
  } else if (stdout_is_terminal()) {
    write_out("\n");
  }

  if (r.finish == FinishReason::Length)
    fmt::print(stderr, "llmctl: note: context full at {} tokens (-c {}); generation stopped\n",
               r.n_prompt + n_gen, n_ctx);
  fmt::print(stderr, "llmctl: prompt {} tokens in {:.2f} ms, generated {} tokens in {:.2f} ms\n",
             r.n_prompt, r.prefill_ms, n_gen, r.ttft_ms - r.prefill_ms + decode_ms);
  fmt::print(stderr,
             "llmctl-run: load_ms={:.3f} prompt_tokens={} gen_tokens={} ttft_ms={:.3f} "
             "prefill_tok_s={:.1f} decode_tok_s={:.1f} p50_ms={:.3f} p95_ms={:.3f} finish={} "
             "seed={} logits_hash={}\n",
             load_ms, r.n_prompt, n_gen, r.ttft_ms, prefill_tok_s, decode_tok_s, p50, p95, finish,
             sp.seed, hash);
  return kExitOk;
}

}  // namespace

void add_run_command(CLI::App& app, Action& action) {
  static RunOptions opt;
  CLI::App* sub = app.add_subcommand(
      "run", "Generate text from a prompt (sampling or greedy, streaming) with timings and a summary line");
  sub->footer(
      "Examples:\n"
      "  llmctl run -m stories260K.gguf -p \"Once upon a time\" -n 48 --temp 0\n"
      "  echo \"Once upon a time\" | llmctl run -m stories260K.gguf --json | jq .generated_ids\n"
      "  llmctl run -m stories260K.gguf -p \"Once upon a time\" -n 0 --logits-out logits.f32\n"
      "\nWithout -p or -f, the prompt is read from standard input when it is not a terminal.\n"
      "stdout carries only the generated text (--json: one JSON object). stderr ends with one\n"
      "summary line of key=value pairs:\n"
      "  llmctl-run: load_ms= prompt_tokens= gen_tokens= ttft_ms= prefill_tok_s= decode_tok_s=\n"
      "              p50_ms= p95_ms= finish=eos|length|n_predict|stop seed= logits_hash=<fnv1a-64 hex>\n"
      "p50/p95 are per-token decode latencies; logits_hash covers the last logits computed.\n"
      "The prompt plus the generated tokens fit in -c positions; a full context stops with\n"
      "finish=length. Sampling order: penalties, top-k, temperature + softmax, top-p, min-p,\n"
      "draw (--temp 0: greedy argmax). The same --seed gives the same output on the same machine;\n"
      "without --seed a random one is used and printed (seed= in the summary, \"seed\" in --json).\n"
      "--stop ends generation before the stop string, which is never printed. One CPU thread.\n"
      "Exit codes: 0 ok, 1 bad input file or error, 2 usage error.");
  sub->add_option("-m,--model", opt.model, "GGUF model")->capture_default_str();
  sub->add_option("-p,--prompt", opt.prompt, "Prompt text");
  sub->add_option("-f,--file", opt.file, "Read the prompt verbatim from FILE; - is stdin");
  sub->add_option("-n,--n-predict", opt.n_predict,
                  "Tokens to generate at most (-1: until EOS or a full context)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{-1}, INT64_MAX));
  SamplerParams& s = opt.sampling;
  sub->add_option("--temp", s.temperature, "Temperature; 0 = greedy")->capture_default_str();
  sub->add_option("--top-k", s.top_k, "Keep the k most likely tokens (0 = off)")->capture_default_str();
  sub->add_option("--top-p", s.top_p, "Nucleus: smallest set with probability >= p (1 = off)")
      ->capture_default_str();
  sub->add_option("--min-p", s.min_p, "Drop tokens below min-p x the top probability (0 = off)")
      ->capture_default_str();
  sub->add_option("--repeat-penalty", s.repeat_penalty, "Repetition penalty (1 = off)")
      ->capture_default_str();
  sub->add_option("--repeat-last-n", s.repeat_last_n, "Tokens the penalties look back on (-1 = all)")
      ->capture_default_str();
  sub->add_option("--presence-penalty", s.presence_penalty, "Presence penalty (0 = off)")
      ->capture_default_str();
  sub->add_option("--frequency-penalty", s.frequency_penalty, "Frequency penalty (0 = off)")
      ->capture_default_str();
  sub->add_option("--seed", opt.seed, "Random seed (default: random, printed in the summary)");
  sub->add_option("--stop", opt.stops, "Stop before this string (repeatable)")->allow_extra_args(false);
  sub->add_option("-c,--ctx-size", opt.ctx_size,
                  "Context positions (default: the model's context length)");
  sub->add_flag("--ignore-eos", opt.ignore_eos, "Keep generating past the end-of-sequence token");
  sub->add_flag("--echo", opt.echo, "Print the prompt before the generated text");
  sub->add_flag("--no-bos", opt.no_bos, "Do not prepend BOS (default: as the vocabulary says)");
  sub->add_flag("--json", opt.json,
                "Print one JSON object (ids, text, finish_reason, timings) instead of text");
  sub->add_option(
      "--logits-out", opt.logits_out,
      "Write the prompt's logits to FILE: raw little-endian float32, one row of n_vocab "
      "values per prompt position (BOS included), in prompt order");
  sub->add_option("-t,--threads", opt.threads, "Threads (accepted; this slice runs on one thread)")
      ->capture_default_str();
  sub->callback([&action, sub] {
    opt.has_prompt = sub->count("--prompt") > 0;
    action = [] { return run_run(opt); };
  });
}

}  // namespace llmctl::cli
