// Windows, the base pass and the model pass of `llmctl eval` (eval.h).
#include "diag/eval.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/stop_point.h"

namespace llmctl {

namespace {

// Positions whose logits are fetched per decode() call: bounds the host logits buffer at
// kRowsPerCall * n_vocab floats (16 MiB for a 128k vocabulary).
constexpr int64_t kRowsPerCall = 32;

}  // namespace

std::vector<EvalWindow> plan_windows(int64_t n_text, int64_t ctx, bool bos) {
  if (ctx < 2)
    throw Error(
        fmt::format("eval: a window of {} token{} has no room for context and a "
                    "scored token; use --ctx 2 or more",
                    ctx, ctx == 1 ? "" : "s"));
  std::vector<EvalWindow> w;
  if (bos) {
    if (n_text < 1) throw Error("eval: the text has no tokens");
    for (int64_t b = 0; b < n_text; b += ctx - 1) w.push_back({b, std::min(ctx - 1, n_text - b)});
  } else {
    if (n_text < 2)
      throw Error(
          fmt::format("eval: the text has {} token{}; without BOS at least 2 are "
                      "needed (one context, one scored)",
                      n_text, n_text == 1 ? "" : "s"));
    // Each window starts at the previous one's last token, which becomes its context.
    for (int64_t b = 0; b + 1 < n_text; b += ctx - 1) w.push_back({b, std::min(ctx, n_text - b)});
  }
  return w;
}

std::vector<EvalWindow> plan_llamacpp_windows(int64_t n_text, int64_t ctx, bool bos) {
  if (ctx < 3)
    throw Error(fmt::format("eval --scoring llama-cpp: a chunk of {} tokens has no second half "
                            "to score; use --ctx 3 or more",
                            ctx));
  const int64_t n_tokens = n_text + (bos ? 1 : 0);  // llama-perplexity's list holds BOS
  if (n_tokens < 2 * ctx)
    throw Error(fmt::format("eval --scoring llama-cpp: the text has {} tokens{}; llama-perplexity's "
                            "scoring needs at least 2 x ctx = {}",
                            n_tokens, bos ? " with BOS" : "", 2 * ctx),
                "use a longer text or a smaller --ctx");
  std::vector<EvalWindow> w;
  for (int64_t i = 0; i < n_tokens / ctx; ++i)
    w.push_back({i * ctx, bos ? ctx - 1 : ctx, ctx / 2});
  return w;
}

std::vector<EvalWindow> plan_windows(EvalScoring scoring, int64_t n_text, int64_t ctx, bool bos) {
  return scoring == EvalScoring::LlamaCpp ? plan_llamacpp_windows(n_text, ctx, bos)
                                          : plan_windows(n_text, ctx, bos);
}

const EvalScoringInfo& eval_scoring_info(EvalScoring s) {
  for (const EvalScoringInfo& i : kEvalScorings)
    if (i.scoring == s) return i;
  LLMCTL_ASSERT(false);
  return kEvalScorings[0];
}

std::optional<EvalScoring> eval_scoring_from_name(std::string_view name) {
  for (const EvalScoringInfo& i : kEvalScorings)
    if (name == i.name) return i.scoring;
  return std::nullopt;
}

std::vector<std::string> eval_scoring_names() {
  std::vector<std::string> v;
  for (const EvalScoringInfo& i : kEvalScorings) v.emplace_back(i.name);
  return v;
}

int64_t n_scored(const EvalWindow& w, bool bos) { return w.n + (bos ? 1 : 0) - 1 - w.score_from; }

void run_windows(Forward& fwd, const std::vector<int32_t>& text, int32_t bos,
                 const std::vector<EvalWindow>& windows, const ScoredFn& on_scored,
                 const ProgressFn& progress) {
  const int64_t n_vocab = fwd.n_vocab();
  std::vector<int32_t> seq;
  std::vector<BatchToken> batch;
  for (size_t wi = 0; wi < windows.size(); ++wi) {
    const EvalWindow& w = windows[wi];
    LLMCTL_ASSERT(w.begin >= 0 && w.n >= 1 && w.begin + w.n <= static_cast<int64_t>(text.size()));
    seq.clear();
    if (bos >= 0) seq.push_back(bos);
    seq.insert(seq.end(), text.begin() + w.begin, text.begin() + w.begin + w.n);
    const auto len = static_cast<int64_t>(seq.size());
    LLMCTL_ASSERT(w.score_from >= 0 && w.score_from < len);
    fwd.reset();
    // Position i predicts seq[i + 1]: positions score_from .. len-2 want their logits.
    const auto scored = [&](int64_t i) { return i >= w.score_from && i + 1 < len; };
    for (int64_t i0 = 0; i0 < len; i0 += kRowsPerCall) {
      stop_point();  // Ctrl-C between forward calls
      const int64_t m = std::min(kRowsPerCall, len - i0);
      if (fwd.cache().reserve(0, m) != Reserve::Ok)
        throw Error(fmt::format("eval: the KV cache has no room for a window of {} tokens", len));
      batch.clear();
      int64_t rows = 0, first_row = -1;
      for (int64_t i = i0; i < i0 + m; ++i) {
        batch.push_back(BatchToken{0, seq[static_cast<size_t>(i)], scored(i)});
        if (scored(i) && rows++ == 0) first_row = i;
      }
      const std::vector<float>& logits = fwd.decode(batch);
      LLMCTL_ASSERT(static_cast<int64_t>(logits.size()) == rows * n_vocab);
      for (int64_t r = 0; r < rows; ++r)  // the scored positions of a chunk are contiguous
        on_scored(seq[static_cast<size_t>(first_row + r + 1)], logits.data() + r * n_vocab);
    }
    if (progress) progress(static_cast<int64_t>(wi) + 1, static_cast<int64_t>(windows.size()));
  }
}

EvalResult collect_base(Forward& base, const std::vector<int32_t>& text, int32_t bos,
                        const std::vector<EvalWindow>& windows, int top_k, BaseTopK& out,
                        const ProgressFn& progress) {
  const int64_t n_vocab = base.n_vocab();
  if (top_k < 1 || top_k > n_vocab)
    throw Error(fmt::format("eval: --top-k {} is outside [1, n_vocab = {}]", top_k, n_vocab));
  out = BaseTopK{};
  out.k = top_k;
  EvalResult r;
  double nll = 0;
  std::vector<double> logp;
  run_windows(
      base, text, bos, windows,
      [&](int32_t target, const float* logits) {
        log_softmax(logits, n_vocab, logp);
        nll -= logp[static_cast<size_t>(target)];
        append_top_k(logp, out);
      },
      progress);
  r.n_windows = static_cast<int64_t>(windows.size());
  r.n_scored = out.n_positions();
  r.mean_nll = nll / static_cast<double>(std::max<int64_t>(r.n_scored, 1));
  r.ppl = std::exp(r.mean_nll);
  return r;
}

EvalResult evaluate(Forward& model, const std::vector<int32_t>& text, int32_t bos,
                    const std::vector<EvalWindow>& windows, const BaseTopK* base,
                    const EvalResult* base_result, const ProgressFn& progress) {
  const int64_t n_vocab = model.n_vocab();
  EvalResult r;
  double nll = 0, delta_p = 0;
  int64_t pos = 0, agree = 0;
  std::vector<double> logp, kl;
  run_windows(
      model, text, bos, windows,
      [&](int32_t target, const float* logits) {
        log_softmax(logits, n_vocab, logp);
        nll -= logp[static_cast<size_t>(target)];
        if (base != nullptr) {
          if (pos >= base->n_positions())
            throw Error("eval: the model scores more positions than the base model did");
          const PositionComparison c = compare_to_base(*base, pos, logp);
          kl.push_back(c.kl);
          agree += c.same_top ? 1 : 0;
          delta_p += c.delta_p;
        }
        ++pos;
      },
      progress);
  r.n_windows = static_cast<int64_t>(windows.size());
  r.n_scored = pos;
  const double n = static_cast<double>(std::max<int64_t>(pos, 1));
  r.mean_nll = nll / n;
  r.ppl = std::exp(r.mean_nll);
  if (base != nullptr) {
    if (pos != base->n_positions())
      throw Error(fmt::format("eval: the model scored {} positions, the base model {}", pos,
                              base->n_positions()));
    r.has_base = true;
    r.top_k = base->k;
    r.kl = summarize(std::move(kl));
    r.top1_agreement = static_cast<double>(agree) / n;
    r.mean_delta_p = delta_p / n;
    if (base_result != nullptr) {
      r.base_mean_nll = base_result->mean_nll;
      r.base_ppl = base_result->ppl;
    }
  }
  return r;
}

}  // namespace llmctl
