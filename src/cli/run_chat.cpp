// llmctl run -i: interactive chat. Each line on stdin is a user turn; the whole conversation
// is rendered with the chat template (chat_template.h) and the answer streams to stdout.
//
// Template: --chat-template NAME, else detected from the GGUF's tokenizer.chat_template;
// neither gives a clear error. -p/-f, when given, is the system message.
// The conversation is re-rendered each turn, and the paged cache's prefix sharing finds the
// blocks of the previous turns (they stay cached after their sequence ends), so only the new
// turn is computed. stdin that is not a terminal is read line by line to its end (scripted
// chats); on a terminal a "> " prompt is shown on stderr. An empty line is skipped; EOF ends
// the chat; Ctrl-C stops the answer being written (a second one ends llmctl). One summary line per
// answer on stderr: llmctl-chat: turn=N prompt_tokens=N reused_tokens=N gen_tokens=N ttft_ms=F
// decode_tok_s=F finish=...
//
// Diagnostics per turn, before that summary line: --attn-stats prints one line (the turn's
// alert, or its largest score when there is none) over the query tokens the turn computed
// (the new part of the conversation and the answer; blocks reused from earlier turns are not
// computed again); --acf one line with the answer's dominant period and loop verdict;
// --stop-on-loop ends the answer (finish=loop) with a note, and the chat goes on.
#include <fmt/format.h>

#include <iostream>
#include <numeric>
#include <string>

#include "cli/interrupt.h"
#include "cli/run_diagnostics.h"
#include "cli/run_session.h"
#include "cli/sampler_picker.h"
#include "core/error.h"
#include "core/text_io.h"
#include "model/scheduler.h"
#include "sampler/stop.h"
#include "tokenizer/chat_template.h"

namespace llmctl::cli {

namespace {

// At most three short lines on stderr: the attention alert (or the largest score), the loop
// verdict, the --stop-on-loop note.
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
  std::optional<ChatTemplate> tmpl;
  if (!opt.chat_template.empty()) {
    tmpl = chat_template_from_name(opt.chat_template);
    if (!tmpl)
      throw Error(fmt::format("--chat-template '{}' is not known", opt.chat_template),
                  "use llama2, llama3, chatml or zephyr");
  } else {
    const std::string jinja = model_chat_template(s);
    tmpl = detect_chat_template(jinja);
    if (!tmpl)
      throw Error(jinja.empty() ? "the model has no chat template (tokenizer.chat_template)"
                                : "the model's chat template is not one llmctl knows",
                  kUnrecognizedChatTemplate);
  }
  fmt::print(stderr, "llmctl: chat template {}; one line per turn, end with EOF (Ctrl-D)\n",
             chat_template_name(*tmpl));

  std::vector<ChatMessage> messages;
  if (opt.has_prompt) messages.push_back(ChatMessage{ChatRole::System, opt.prompt});
  const std::string bos = tok.bos_id() >= 0 ? tok.piece(tok.bos_id()) : "";
  const std::string eos = tok.eos_id() >= 0 ? tok.piece(tok.eos_id()) : "";
  const std::vector<int32_t> end_ids = chat_stop_ids(*tmpl, tok);
  const bool terminal = stdin_is_terminal();
  SamplerParams sp = resolved_sampling(opt);

  for (int turn = 1;; ++turn) {
    if (terminal) fmt::print(stderr, "> ");
    std::string line;
    if (!std::getline(std::cin, line)) break;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) {
      --turn;
      continue;
    }
    messages.push_back(ChatMessage{ChatRole::User, line});
    const std::vector<int32_t> ids =
        tok.encode(render_chat(*tmpl, messages, true, bos, eos), false, true);

    Sampler sampler(sp);
    for (const int32_t id : ids) sampler.accept(id);
    StopMatcher stop(opt.stops);
    StreamDecoder stream(tok);
    std::string answer;
    GenerateOptions g;
    g.n_ctx = s.n_ctx;
    g.n_predict = opt.n_predict;
    g.eos_id = tok.eos_id();
    g.end_ids = end_ids;
    // Picks from device candidates where the sampler allows it (sampler_picker.h).
    use_sampler(g, sampler, static_cast<int32_t>(s.model.config.n_vocab), s.tok->n_vocab());
    g.on_token = [&](int32_t id) {
      const std::string piece = stop.push(stream.push(id)).text;
      answer += piece;
      write_out(piece);
    };
    g.stop_requested = [&stop] { return stop.stopped(); };
    g.interrupted = [] { return interrupted(); };
    SequenceDiagnostics diag(opt, s.model.config);
    diag.attach(g);
    s.fwd->set_observer(diag.attn());
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
    messages.push_back(ChatMessage{ChatRole::Assistant, std::string(python_strip(answer))});
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
