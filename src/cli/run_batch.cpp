// llmctl run --batch FILE: every JSONL request line decoded together over the paged cache
// (continuous batching, scheduler.h), one JSON record per line (batch_io.h).
//
// Nothing is lost: every input line gets exactly one record (a result or an error), each
// written and flushed as soon as it is known, with its "index". Bad lines get error records
// first; a request that fails later (prompt longer than -c) gets one too; the others go on.
// --resume FILE reads an earlier output, skips the indices it answers and appends the new
// records to FILE instead of stdout.
//
// Seeds: a request's "seed", else the run's --seed (or random seed) plus the line index, so
// a batch is reproducible and two lines never share a random stream by accident.
//
// Diagnostics (--attn-stats, --moe-stats, --acf, --stop-on-loop) are per request, as run --json
// reports them for one prompt: a SequenceRouter hands each request's tokens to its own
// collectors (the scheduler says which sequence id a request got), and --stop-on-loop ends only
// the request that loops. With --attn-stats or --moe-stats the prefix cache is not used, so
// every request's prompt is
// computed and measured in full, as when it runs alone. An alert or a loop stop also gets one
// line on stderr naming the input line.
//
// Ctrl-C: the sequences running stop, and neither they nor the queued lines get a record,
// so `--resume` answers them later; exit code 130.
//
// Exit code: 0 when every request has a result, 1 when any line failed (bad JSON, a prompt
// too long...; the records and the summary are written all the same) or a record could not
// be written (the run stops there), 130 on Ctrl-C.
//
// stderr ends with one summary line:
//   llmctl-batch: requests=N ok=N errors=N skipped=N prompt_tokens=N gen_tokens=N
//                 reused_tokens=N wall_ms=F gen_tok_s=F parallel=N
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>

#include "cli/batch_io.h"
#include "cli/batch_shard.h"
#include "cli/chat_setup.h"
#include "cli/interrupt.h"
#include "cli/run_diagnostics.h"
#include "cli/run_session.h"
#include "cli/sampler_picker.h"
#include "core/error.h"
#include "core/output_file.h"
#include "diag/sequence_router.h"
#include "model/scheduler.h"
#include "sampler/stop.h"

namespace llmctl::cli {

namespace {

// Where records go: stdout, or appended to the --resume file. A record that cannot be
// appended (a full disk) ends the run with exit 1 and the OS's reason (AppendFile): the
// records before it are on disk and a later --resume answers the rest.
class RecordSink {
 public:
  explicit RecordSink(const std::string& resume_path, bool partial_line) {
    if (resume_path.empty()) return;
    file_.emplace(resume_path);
    if (partial_line) file_->append("\n");  // the cut-off record stays an unparseable line
  }
  void write(const std::string& line) {
    if (file_)
      file_->append(line + "\n");
    else
      write_out(line + "\n");
  }

 private:
  std::optional<AppendFile> file_;
};

// One request on its way through the scheduler.
struct Pending {
  int64_t index = 0;
  std::optional<nlohmann::json> id;
  std::vector<int32_t> prompt_ids;
  SamplerParams sampling;
  std::unique_ptr<Sampler> sampler;
  std::unique_ptr<StopMatcher> stop;
  std::unique_ptr<StreamDecoder> stream;
  std::string text;
  std::unique_ptr<SequenceDiagnostics> diag;
  int32_t seq = -1;  // its sequence id once admitted
};

// The chat template for "messages" requests, or why there is none (each such request then
// gets an error record; prompt requests are unaffected).
struct ChatChoice {
  std::optional<ChatFormatter> formatter;
  std::string error;
  std::string hint;
};

ChatChoice choose_batch_chat(const RunOptions& opt, const RunSession& s) {
  ChatChoice c;
  try {
    c.formatter.emplace(choose_chat_formatter(
        ChatTemplateChoice{opt.chat_template, opt.chat_template_file},
        model_chat_template_text(s.model.path, s.model.gguf.get()), *s.tok));
  } catch (const Error& e) {
    c.error = e.what();
    c.hint = e.hint();
  }
  return c;
}

std::vector<int32_t> encode_request(const BatchRequest& rq, const RunSession& s,
                                    const RunOptions& opt,
                                    const ChatChoice& chat) {
  const Tokenizer& tok = *s.tok;
  if (rq.prompt)
    return tok.encode(*rq.prompt, !opt.no_bos && tok.add_bos_default(), !opt.no_parse_special);
  if (!chat.formatter) throw Error(chat.error, chat.hint);
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  for (const ChatMessage& m : rq.messages)
    messages.push_back({{"role", chat_role_name(m.role)}, {"content", m.content}});
  return chat.formatter->encode(messages, nlohmann::ordered_json(), true);
}

}  // namespace

int run_batch(const RunOptions& opt) {
  // ---- read the requests and what an earlier run answered ---------------------------------
  std::vector<BatchLine> lines = read_batch_file(opt.batch_file);
  // --shard K/N: the other lines belong to the other shards (batch_shard.h).
  if (!opt.shard.empty()) keep_shard_lines(lines, parse_batch_shard(opt.shard));
  PreviousOutput previous;
  if (!opt.resume.empty()) {
    std::ifstream prev(opt.resume, std::ios::binary);
    if (prev) previous = scan_previous_output(prev);  // a missing file: nothing answered yet
  }
  RecordSink sink(opt.resume, previous.ends_with_partial_line);

  RunSession s = open_run_session(opt, opt.parallel);
  const Tokenizer& tok = *s.tok;
  const ChatChoice chat = choose_batch_chat(opt, s);
  const SamplerParams base = resolved_sampling(opt);

  // ---- queue every good line; error records for the rest ----------------------------------
  using Clock = std::chrono::steady_clock;
  const Clock::time_point t0 = Clock::now();
  std::vector<std::unique_ptr<Pending>> pending;
  SequenceRouter router;  // --attn-stats, --moe-stats: each request's tokens to its collectors
  if (observes_forward_pass(opt)) s.fwd->set_observer(&router);
  SchedulerOptions sched_opt{opt.parallel};
  sched_opt.on_admit = [&pending, &router](size_t k, int32_t seq) {
    Pending& p = *pending[k];
    p.seq = seq;
    if (ForwardObserver* o = p.diag->observer()) router.bind(seq, o);
  };
  Scheduler sched(*s.fwd, sched_opt);
  int64_t n_errors = 0, n_skipped = 0, n_ok = 0, prompt_tokens = 0, gen_tokens = 0, reused = 0;
  for (BatchLine& line : lines) {
    if (previous.answered.count(line.index) != 0) {
      ++n_skipped;
      continue;
    }
    if (!line.request) {
      sink.write(batch_error_json(line.index, line.id, line.error));
      ++n_errors;
      continue;
    }
    const BatchRequest& rq = *line.request;
    auto p = std::make_unique<Pending>();
    p->index = line.index;
    p->id = line.id;
    p->sampling = base;
    p->sampling.seed = rq.seed ? *rq.seed : base.seed + static_cast<uint64_t>(line.index);
    if (rq.temperature) p->sampling.temperature = *rq.temperature;
    if (rq.top_k) p->sampling.top_k = *rq.top_k;
    if (rq.top_p) p->sampling.top_p = *rq.top_p;
    if (rq.min_p) p->sampling.min_p = *rq.min_p;
    try {
      validate_sampler_params(p->sampling);
      p->prompt_ids = encode_request(rq, s, opt, chat);
      p->sampler = std::make_unique<Sampler>(p->sampling);
      for (const int32_t t : p->prompt_ids) p->sampler->accept(t);
      p->stop = std::make_unique<StopMatcher>(rq.stop.empty() ? opt.stops : rq.stop);
      p->stream = std::make_unique<StreamDecoder>(tok);
      Pending* raw = p.get();
      GenerateOptions g = base_generate_options(
          opt, s,
          rq.prompt == std::nullopt && chat.formatter ? chat.formatter->stop_ids()
                                                      : std::vector<int32_t>{});
      g.n_predict = rq.n_predict.value_or(opt.n_predict);
      // Picks from device candidates where the sampler allows it (sampler_picker.h).
      use_sampler(g, *raw->sampler, static_cast<int32_t>(s.model.config.n_vocab), s.tok->n_vocab());
      g.on_token = [raw](int32_t id) { raw->text += raw->stop->push(raw->stream->push(id)).text; };
      g.stop_requested = [raw] { return raw->stop->stopped(); };
      p->diag = std::make_unique<SequenceDiagnostics>(opt, s);
      p->diag->attach(g);
      g.reuse_prefix = !observes_forward_pass(opt);  // a reused prefix would not be measured
      const size_t k = sched.submit(p->prompt_ids, g);
      LLMCTL_ASSERT(k == pending.size());
      pending.push_back(std::move(p));
    } catch (const Error& e) {
      sink.write(batch_error_json(line.index, line.id,
                                  fmt::format("line {}: {}", line.index + 1, e.what())));
      ++n_errors;
    }
  }

  // ---- decode them together; a record as each finishes --------------------------------------
  int64_t n_interrupted = 0;
  sched.run([&](size_t k, GenerateResult&& r) {
    Pending& p = *pending[k];
    router.unbind(p.seq);
    if (r.finish == FinishReason::Interrupted) {  // no record: --resume runs it again
      ++n_interrupted;
      pending[k].reset();
      return;
    }
    if (!p.stop->stopped()) {
      p.text += p.stop->push(p.stream->flush()).text;
      p.text += p.stop->flush();
    }
    BatchResult out;
    out.index = p.index;
    out.id = p.id;
    out.prompt_ids = p.prompt_ids;
    out.generated_ids = r.generated_ids;
    out.text = p.text;
    out.finish_reason = finish_reason_name(r.finish);
    out.seed = p.sampling.seed;
    const double decode_ms = std::accumulate(r.decode_ms.begin(), r.decode_ms.end(), 0.0);
    out.timings.prefill_ms = r.prefill_ms;
    out.timings.ttft_ms = r.ttft_ms;
    out.timings.decode_ms = decode_ms;
    out.timings.prefill_tok_s =
        r.prefill_ms > 0 ? static_cast<double>(r.n_prompt) * 1000.0 / r.prefill_ms : 0.0;
    out.timings.decode_tok_s =
        decode_ms > 0 ? static_cast<double>(r.decode_ms.size()) * 1000.0 / decode_ms : 0.0;
    out.timings.p50_ms = percentile(r.decode_ms, 50.0);
    out.timings.p95_ms = percentile(r.decode_ms, 95.0);
    out.logits_hash = fmt::format("{:016x}", r.last_logits_hash);
    p.diag->add_json(out.diagnostics, p.diag->acf_report(r));
    sink.write(batch_result_json(out));
    if (const auto alert = p.diag->alert_text())
      fmt::print(stderr, "llmctl: attn-alert: line {}: {}\n", p.index + 1, *alert);
    if (r.finish == FinishReason::Loop)
      fmt::print(stderr, "llmctl: note: line {}: {}; this request stopped (--stop-on-loop)\n",
                 p.index + 1, p.diag->loop_stop_text());
    ++n_ok;
    prompt_tokens += r.n_prompt;
    gen_tokens += static_cast<int64_t>(r.generated_ids.size());
    reused += r.n_reused;
    pending[k].reset();  // its sampler and text are no longer needed
  });

  s.fwd->set_observer(nullptr);
  if (interrupted() && !output_closed())
    fmt::print(stderr,
               "llmctl: note: interrupted; {} requests have no record yet (--resume "
               "answers them later)\n",
               static_cast<int64_t>(pending.size()) - n_ok);
  int code = finish_exit_code();  // its message comes before the summary line
  if (code == 0 && n_errors > 0) {
    // Every line has its record, but a script running with `set -e` must notice the failures.
    fmt::print(stderr, "llmctl: error: {} of {} requests failed; their records say why\n", n_errors,
               static_cast<int64_t>(lines.size()));
    code = 1;
  }
  const double wall_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  const double tok_s = wall_ms > 0 ? static_cast<double>(gen_tokens) * 1000.0 / wall_ms : 0.0;
  fmt::print(stderr,
             "llmctl-batch: requests={} ok={} errors={} skipped={} prompt_tokens={} "
             "gen_tokens={} reused_tokens={} wall_ms={:.3f} gen_tok_s={:.1f} parallel={}\n",
             static_cast<int64_t>(lines.size()), n_ok, n_errors, n_skipped, prompt_tokens,
             gen_tokens, reused, wall_ms, tok_s, opt.parallel);
  return code;
}

}  // namespace llmctl::cli
