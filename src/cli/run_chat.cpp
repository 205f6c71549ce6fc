// llmctl run -i: interactive chat. Each line on stdin is a user turn; the whole conversation
// is rendered with the chat template and the answer streams to stdout.
//
// Template (chat_setup.h): the model's own Jinja template by default, --chat-template-file or
// a built-in --chat-template NAME otherwise. --system TEXT (or -p/-f) is the system message;
// without one the template's own default system prompt, if it has one, stays. What the user
// types is never parsed for special tokens (chat.h). The conversation is re-rendered each
// turn, and the paged cache's prefix sharing finds the blocks of the previous turns (they stay
// cached after their sequence ends), so only the new suffix is computed. When the history
// outgrows -c, the oldest turns after the system message are dropped, with a note on stderr.
// On a terminal, lines are read through libedit (editing, history); otherwise stdin is read
// line by line to its end (scripted chats). An empty line is skipped; EOF ends
// the chat; Ctrl-C stops the answer being written (a second one ends llmctl). One summary line per
// answer on stderr: llmctl-chat: turn=N prompt_tokens=N reused_tokens=N gen_tokens=N ttft_ms=F
// decode_tok_s=F finish=...
//
// Diagnostics per turn, before that summary line: --attn-stats prints one line (the turn's
// alert, or its largest score when there is none) over the query tokens the turn computed
// (the new part of the conversation and the answer; blocks reused from earlier turns are not
// computed again); --moe-stats one line over the same tokens (router entropy, top-k mass and
// the experts never chosen, means over the layers); --acf one line with the answer's dominant
// period and loop verdict;
// --stop-on-loop ends the answer (finish=loop) with a note, and the chat goes on.
#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>

#include "cli/chat_setup.h"
#include "cli/interrupt.h"
#include "cli/line_reader.h"
#include "cli/run_diagnostics.h"
#include "cli/run_session.h"
#include "cli/sampler_picker.h"
#include "core/error.h"
#include "core/text_io.h"
#include "diag/moe_stats_report.h"
#include "model/scheduler.h"
#include "sampler/stop.h"
#include "tokenizer/chat.h"

namespace llmctl::cli {

namespace {

using Json = nlohmann::ordered_json;

std::string role_of(const Json& message) {
  const auto it = message.find("role");
  return it != message.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The prompt ids for the conversation, leaving room for an answer: `reserve` positions of the
// context stay free. Drops the oldest messages after the system message (a user turn with the
// answer that follows it) until the prompt fits; never the newest user turn. Returns empty
// ids when even that turn does not fit.
std::vector<int32_t> fit_history(const ChatFormatter& chat, Json& messages, int64_t n_ctx,
                                 int64_t reserve) {
  const size_t first = !messages.empty() && role_of(messages[0]) == "system" ? 1 : 0;
  size_t dropped = 0;
  for (;;) {
    std::vector<int32_t> ids = chat.encode(messages, Json(), true);
    if (static_cast<int64_t>(ids.size()) + reserve <= n_ctx) {
      if (dropped > 0)
        fmt::print(stderr,
                   "llmctl: note: the conversation outgrew the context (-c {}): dropped the {} "
                   "oldest message{} after the system prompt\n",
                   n_ctx, dropped, dropped == 1 ? "" : "s");
      return ids;
    }
    if (messages.size() <= first + 1) return {};
    // One user turn and the assistant answer after it, so roles keep alternating.
    size_t n = 1;
    if (messages.size() > first + 2 && role_of(messages[first + 1]) == "assistant") n = 2;
    messages.erase(messages.begin() + static_cast<std::ptrdiff_t>(first),
                   messages.begin() + static_cast<std::ptrdiff_t>(first + n));
    dropped += n;
  }
}

// At most four short lines on stderr: the attention alert (or the largest score), the router
// statistics, the loop verdict, the --stop-on-loop note.
void print_turn_diagnostics(int turn, SequenceDiagnostics& diag, const GenerateResult& r) {
  if (const AttnStatsCollector* attn = diag.attn()) {
    if (const auto alert = diag.alert_text()) {
      fmt::print(stderr, "llmctl: attn-alert: turn {}: {}\n", turn, *alert);
    } else {
      AttnHeadStats top;  // every layer merged
      int64_t top_layer = -1;
      for (int64_t l = 0; l < attn->n_layers(); ++l) {
        const AttnHeadStats a = attn->layer(l);
        if (a.n_finite > 0 && (top_layer < 0 || a.max > top.max)) {
          top = a;
          top_layer = l;
        }
      }
      fmt::print(stderr, "llmctl: attn-stats: turn {}: {} query tokens, no alert", turn,
                 attn->n_tokens());
      if (top_layer >= 0)
        fmt::print(stderr, " (largest scaled score {:.3f}: layer {} head {} position {})", top.max,
                   top_layer, top.max_head, top.max_pos);
      fmt::print(stderr, "\n");
    }
  }
  if (const MoeStatsCollector* moe = diag.moe())
    fmt::print(stderr, "llmctl: moe-stats: turn {}: {}\n", turn, moe_stats_line(*moe));
  if (const auto acf = diag.acf_report(r)) {
    const Period& p = acf->tokens.period;
    fmt::print(stderr, "llmctl: acf: turn {}: {} tokens, dominant period {}{}; loop: {}\n", turn,
               acf->n_tokens, p.lag,
               p.lag > 0 ? fmt::format(" (kappa {:.3f})", p.strength) : std::string(),
               acf->loop.detected
                   ? fmt::format("period {} from generated token {}, found at token {}",
                                 acf->loop.period, acf->loop.start, acf->loop.at)
                   : std::string("none"));
  }
  if (r.finish == FinishReason::Loop)
    fmt::print(stderr,
               "llmctl: note: turn {}: {}; answer stopped (--stop-on-loop), the chat goes on\n",
               turn, diag.loop_stop_text());
}

}  // namespace

int run_chat(const RunOptions& opt) {
  RunSession s = open_run_session(opt, 1);
  const Tokenizer& tok = *s.tok;
  const ChatFormatter chat = choose_chat_formatter(
      ChatTemplateChoice{opt.chat_template, opt.chat_template_file},
      model_chat_template_text(s.model.path, s.model.gguf.get()), tok);
  fmt::print(stderr, "llmctl: chat with the {}; one line per turn, end with EOF (Ctrl-D)\n",
             chat.description());

  Json messages = Json::array();
  if (!opt.system.empty())
    messages.push_back({{"role", "system"}, {"content", opt.system}});
  else if (opt.has_prompt)
    messages.push_back({{"role", "system"}, {"content", opt.prompt}});
  const std::vector<int32_t>& end_ids = chat.stop_ids();
  LineReader reader;
  SamplerParams sp = resolved_sampling(opt);
  // Room left for each answer: -n, at most half the context.
  const int64_t reserve =
      std::clamp<int64_t>(opt.n_predict < 0 ? s.n_ctx / 2 : opt.n_predict, 1,
                          std::max<int64_t>(1, s.n_ctx / 2));

  for (int turn = 1;; ++turn) {
    const std::optional<std::string> line = reader.read("> ");
    if (!line) break;
    if (line->find_first_not_of(" \t") == std::string::npos) {
      --turn;
      continue;
    }
    messages.push_back({{"role", "user"}, {"content", *line}});
    // Fitted on a copy: a turn that cannot fit leaves the history as it was.
    Json fitted = messages;
    const std::vector<int32_t> ids = fit_history(chat, fitted, s.n_ctx, reserve);
    if (ids.empty()) {
      fmt::print(stderr,
                 "llmctl: note: turn {} does not fit in the context (-c {}) with room for an "
                 "answer; skipped, the chat goes on\n",
                 turn, s.n_ctx);
      messages.erase(messages.end() - 1);
      --turn;
      continue;
    }
    messages = std::move(fitted);

    Sampler sampler(sp);
    for (const int32_t id : ids) sampler.accept(id);
    StopMatcher stop(opt.stops);
    StreamDecoder stream(tok);
    std::string answer;
    GenerateOptions g = base_generate_options(opt, s, end_ids);
    // Picks from device candidates where the sampler allows it (sampler_picker.h).
    use_sampler(g, sampler, static_cast<int32_t>(s.model.config.n_vocab), s.tok->n_vocab());
    g.on_token = [&](int32_t id) {
      const std::string piece = stop.push(stream.push(id)).text;
      answer += piece;
      write_out(piece);
    };
    g.stop_requested = [&stop] { return stop.stopped(); };
    SequenceDiagnostics diag(opt, s);
    diag.attach(g);
    s.fwd->set_observer(diag.observer());
    const GenerateResult r = generate(*s.fwd, ids, g);
    s.fwd->set_observer(nullptr);
    if (output_closed()) break;
    clear_interrupt();  // Ctrl-C ended this answer, not the chat
    if (!stop.stopped()) {
      std::string tail = stop.push(stream.flush()).text;
      tail += stop.flush();
      answer += tail;
      write_out(tail);
    }
    write_out("\n");
    messages.push_back({{"role", "assistant"}, {"content", std::string(python_strip(answer))}});
    sp.seed += 1;  // a fresh random stream per turn, still reproducible from --seed

    print_turn_diagnostics(turn, diag, r);
    const double decode_ms = std::accumulate(r.decode_ms.begin(), r.decode_ms.end(), 0.0);
    fmt::print(stderr,
               "llmctl-chat: turn={} prompt_tokens={} reused_tokens={} gen_tokens={} "
               "ttft_ms={:.3f} decode_tok_s={:.1f} finish={}\n",
               turn, r.n_prompt, r.n_reused, r.generated_ids.size(), r.ttft_ms,
               decode_ms > 0 ? static_cast<double>(r.decode_ms.size()) * 1000.0 / decode_ms : 0.0,
               finish_reason_name(r.finish));
    if (r.finish == FinishReason::Length)
      fmt::print(stderr, "llmctl: note: the conversation filled the context (-c {})\n", s.n_ctx);
  }
  return finish_exit_code();
}

}  // namespace llmctl::cli
