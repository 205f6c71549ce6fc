#pragma once
// `llmctl eval`'s engine side: perplexity of a model over a text, and how far its next-token
// distributions are from a base model's (eval_metrics.h has the arithmetic).
//
// Windows and scoring (one rule, documented in `llmctl eval --help`):
//   The text is tokenized once without BOS, t_0 .. t_{N-1}, and cut into consecutive
//   windows, each evaluated from an empty KV cache.
//   With BOS (the vocabulary has one and the model wants it): a window is
//     [BOS, t_b, ..., t_{b+n-1}], n <= ctx - 1,
//   and every text token in it is scored: t_{b+i} is predicted from BOS, t_b .. t_{b+i-1}.
//   Every text token is scored exactly once (the first of each window from BOS alone).
//   Without BOS: a window is [t_b, ..., t_{b+n-1}], n <= ctx, its first token is context
//   only, and the next window starts at the previous one's last token, so every token but
//   t_0 is scored exactly once.
//   perplexity = exp(mean over scored tokens of -log q(token | context)).
//
// --scoring llama-cpp: llama-perplexity's rule (tools/perplexity/perplexity.cpp, its default
// mode), so that a number can be set beside those published for llama.cpp quantizations:
//   Its token list is [BOS] + text (BOS only when the model wants one), cut into
//   floor(len / ctx) chunks of exactly ctx tokens (the remainder is not evaluated; fewer
//   than 2 * ctx tokens is an error). A chunk's first token is replaced by BOS, each chunk
//   runs from an empty cache, and only positions ctx/2 .. ctx-2 are scored (each predicting
//   the next token): ctx - 1 - ctx/2 per chunk, every one with at least ctx/2 of context.
//   Over our BOS-less text that is the window [BOS, t_b .. t_{b+ctx-2}], b = i * ctx, with
//   score_from = ctx/2 (the token a chunk's BOS replaces is in no window); without BOS the
//   window [t_b .. t_{b+ctx-1}]. Scoring fewer, better-predicted tokens gives a lower
//   perplexity than ours for the same model: the two are not comparable.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "diag/eval_metrics.h"
#include "model/forward.h"

namespace llmctl {

struct EvalWindow {
  int64_t begin = 0;       // first text token
  int64_t n = 0;           // text tokens in the window
  int64_t score_from = 0;  // the first window position (BOS = 0) whose prediction is scored
};

// Which tokens a perplexity scores (rules above), one row each.
enum class EvalScoring { Llmctl, LlamaCpp };
struct EvalScoringInfo {
  EvalScoring scoring;
  const char* name;         // --scoring NAME, "scoring" in --json
  const char* description;  // for the text report
};
inline constexpr EvalScoringInfo kEvalScorings[] = {
    {EvalScoring::Llmctl, "llmctl", "every text token once"},
    {EvalScoring::LlamaCpp, "llama-cpp",
     "llama-perplexity's rule: the second half of each chunk of ctx tokens"},
};
const EvalScoringInfo& eval_scoring_info(EvalScoring s);
std::optional<EvalScoring> eval_scoring_from_name(std::string_view name);
std::vector<std::string> eval_scoring_names();

// Windows for n_text tokens (rule above). Throws Error when ctx < 2 (no room for a context
// token and a scored one) or when there is nothing to score (no tokens; one token and no BOS).
std::vector<EvalWindow> plan_windows(int64_t n_text, int64_t ctx, bool bos);
// llama-perplexity's chunks (rule above). Throws Error when ctx < 3 (an empty second half)
// or the text has fewer than 2 * ctx tokens, counting BOS, as llama-perplexity refuses it.
std::vector<EvalWindow> plan_llamacpp_windows(int64_t n_text, int64_t ctx, bool bos);
std::vector<EvalWindow> plan_windows(EvalScoring scoring, int64_t n_text, int64_t ctx, bool bos);
// Tokens scored in window w.
int64_t n_scored(const EvalWindow& w, bool bos);

// Called for every scored token, in text order: the token and the model's logits (n_vocab)
// predicting it.
using ScoredFn = std::function<void(int32_t target, const float* logits)>;
// Called after each window: windows done, windows in all.
using ProgressFn = std::function<void(int64_t done, int64_t total)>;

// Runs every window through `fwd` (a single-sequence Forward of at least ctx positions:
// Forward(config, weights, backend, ctx)) and calls on_scored for each scored token. bos < 0:
// no BOS. Logits are asked for a few dozen rows at a time, so memory stays
// O(chunk * n_vocab) whatever the window length.
void run_windows(Forward& fwd, const std::vector<int32_t>& text, int32_t bos,
                 const std::vector<EvalWindow>& windows, const ScoredFn& on_scored,
                 const ProgressFn& progress);

// Perplexity and, against a base, the KL statistics.
struct EvalResult {
  int64_t n_windows = 0;
  int64_t n_scored = 0;
  double mean_nll = 0;  // nats per scored token
  double ppl = 0;       // exp(mean_nll)
  // With a base model (has_base):
  bool has_base = false;
  int top_k = 0;
  double base_mean_nll = 0;
  double base_ppl = 0;
  Distribution kl;            // KL_K(base || model) per scored token, nats
  double top1_agreement = 0;  // fraction of scored tokens where the top tokens agree
  double mean_delta_p = 0;    // mean of q(base top) - p(base top)
};

// The base pass: keeps the top-k summary of every scored position (k <= n_vocab) and the
// base model's own perplexity (returned in mean_nll / ppl).
EvalResult collect_base(Forward& base, const std::vector<int32_t>& text, int32_t bos,
                        const std::vector<EvalWindow>& windows, int top_k, BaseTopK& out,
                        const ProgressFn& progress);
// The model pass: perplexity, and the comparison with `base` when it is not null (its
// positions must be those of the same text and windows). base_result: the base pass's result
// (for its perplexity), or null.
EvalResult evaluate(Forward& model, const std::vector<int32_t>& text, int32_t bos,
                    const std::vector<EvalWindow>& windows, const BaseTopK* base,
                    const EvalResult* base_result, const ProgressFn& progress);

}  // namespace llmctl
