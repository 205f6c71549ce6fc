// llmctl run with one prompt: streamed text on stdout (or --json), timings and the summary
// line on stderr (output contract in cmd_run.cpp).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>

#include "cli/interrupt.h"
#include "cli/run_diagnostics.h"
#include "cli/run_session.h"
#include "cli/sampler_picker.h"
#include "core/error.h"
#include "core/output_file.h"
#include "core/text_io.h"
#include "diag/acf_report.h"
#include "diag/attn_stats_report.h"
#include "diag/moe_stats_report.h"
#include "sampler/stop.h"

namespace llmctl::cli {

namespace {

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

// --logits-out: rows of n_vocab float32, little-endian whatever the host, through
// core/output_file.h (the file appears complete when the run ends, or not at all).
class LogitsWriter {
 public:
  explicit LogitsWriter(const std::string& path) : out_(path) {}
  void write(const std::vector<float>& row) {
    bytes_.resize(row.size() * 4);
    for (size_t i = 0; i < row.size(); ++i) {
      uint32_t u = 0;
      std::memcpy(&u, &row[i], 4);
      for (size_t b = 0; b < 4; ++b) bytes_[i * 4 + b] = static_cast<char>((u >> (8 * b)) & 0xFFu);
    }
    out_.write(bytes_.data(), bytes_.size());
  }
  void close() { out_.commit(); }

 private:
  OutputFile out_;
  std::vector<char> bytes_;
};

}  // namespace

int run_single(const RunOptions& opt) {
  const std::string text = prompt_text(opt);
  RunSession s = open_run_session(opt, 1);
  const Tokenizer& tok = *s.tok;
  const bool add_bos = !opt.no_bos && tok.add_bos_default();
  const std::vector<int32_t> prompt_ids = tok.encode(text, add_bos, !opt.no_parse_special);

  // ---- generate --------------------------------------------------------------------------
  StreamDecoder stream(tok);
  std::string generated_text;  // for --json
  std::optional<LogitsWriter> logits_out;
  if (!opt.logits_out.empty()) logits_out.emplace(opt.logits_out);
  if (opt.echo && !opt.json) {
    // Through the same decoder, so the continuation keeps its leading space after the prompt.
    for (const int32_t id : prompt_ids) write_out(stream.push(id));
  }

  const SamplerParams sp = resolved_sampling(opt);
  Sampler sampler(sp);
  for (const int32_t id : prompt_ids)
    sampler.accept(id);  // penalties see the prompt, as llama.cpp's
  StopMatcher stop(opt.stops);
  auto emit = [&](const std::string& piece) {
    if (opt.json)
      generated_text += piece;
    else
      write_out(piece);
  };

  // ---- diagnostics (off unless asked: no observer, no per-pick work) --------------------------
  SequenceDiagnostics diag(opt, s);
  s.fwd->set_observer(diag.observer());

  GenerateOptions g = base_generate_options(opt, s);
  // Picks from device candidates where the sampler allows it (sampler_picker.h).
  use_sampler(g, sampler, static_cast<int32_t>(s.model.config.n_vocab), s.tok->n_vocab());
  if (logits_out)
    g.on_prompt_logits = [&](int64_t, const std::vector<float>& row) { logits_out->write(row); };
  g.on_token = [&](int32_t id) { emit(stop.push(stream.push(id)).text); };
  g.stop_requested = [&stop] { return stop.stopped(); };
  diag.attach(g);
  const GenerateResult r = generate(*s.fwd, prompt_ids, g);
  s.fwd->set_observer(nullptr);
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
  const std::optional<AcfReport> acf = diag.acf_report(r);

  if (opt.json) {
    nlohmann::json j{{"model", opt.model},
                     {"prompt_ids", prompt_ids},
                     {"generated_ids", r.generated_ids},
                     {"text", generated_text},
                     {"finish_reason", finish},
                     {"n_ctx", s.n_ctx},
                     {"seed", sp.seed},
                     {"timings",
                      {{"load_ms", s.load_ms},
                       {"prefill_ms", r.prefill_ms},
                       {"ttft_ms", r.ttft_ms},
                       {"decode_ms", decode_ms},
                       {"prefill_tok_s", prefill_tok_s},
                       {"decode_tok_s", decode_tok_s},
                       {"p50_ms", p50},
                       {"p95_ms", p95}}},
                     {"logits_hash", hash}};
    diag.add_json(j, acf);
    fmt::print("{}\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    flush_out();
  } else if (stdout_is_terminal()) {
    write_out("\n");
  }

  if (!opt.json) {
    // Piped text keeps its exact bytes (no newline added), so with 2>&1 the tables would run
    // on from the last generated word: start them on a line of their own there.
    if ((diag.attn() || diag.moe() || acf) && !stdout_is_terminal() && stdout_shares_stderr()) {
      flush_out();
      fmt::print(stderr, "\n");
    }
    if (diag.attn()) fmt::print(stderr, "{}", attn_stats_table(*diag.attn()));
    if (diag.moe()) fmt::print(stderr, "{}", moe_stats_table(*diag.moe()));
    if (acf) fmt::print(stderr, "{}", acf_table(*acf));
  }
  if (const auto alert = diag.alert_text()) fmt::print(stderr, "llmctl: attn-alert: {}\n", *alert);
  if (r.finish == FinishReason::Loop)
    fmt::print(stderr, "llmctl: note: {}; generation stopped (--stop-on-loop)\n",
               diag.loop_stop_text());
  if (r.finish == FinishReason::Interrupted && !output_closed())  // else finish_stdout's word
    fmt::print(stderr, "llmctl: note: interrupted after {} generated tokens\n", n_gen);
  const int code = finish_exit_code();  // its message comes before the summary line
  if (r.finish == FinishReason::Length)
    fmt::print(stderr, "llmctl: note: context full at {} tokens (-c {}); generation stopped\n",
               r.n_prompt + n_gen, s.n_ctx);
  fmt::print(stderr, "llmctl: prompt {} tokens in {:.2f} ms, generated {} tokens in {:.2f} ms\n",
             r.n_prompt, r.prefill_ms, n_gen,
             n_gen > 0 ? r.ttft_ms - r.prefill_ms + decode_ms : 0.0);
  fmt::print(stderr,
             "llmctl-run: load_ms={:.3f} prompt_tokens={} gen_tokens={} ttft_ms={:.3f} "
             "prefill_tok_s={:.1f} decode_tok_s={:.1f} p50_ms={:.3f} p95_ms={:.3f} finish={} "
             "seed={} logits_hash={}\n",
             s.load_ms, r.n_prompt, n_gen, r.ttft_ms, prefill_tok_s, decode_tok_s, p50, p95, finish,
             sp.seed, hash);
  return code;
}

}  // namespace llmctl::cli
