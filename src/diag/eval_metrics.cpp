// The arithmetic of `llmctl eval` (eval_metrics.h).
#include "diag/eval_metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"

namespace llmctl {

void log_softmax(const float* logits, int64_t n, std::vector<double>& out) {
  LLMCTL_ASSERT(n > 0);
  out.resize(static_cast<size_t>(n));
  double mx = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < n; ++j) mx = std::max(mx, static_cast<double>(logits[j]));
  if (!std::isfinite(mx)) throw Error("eval: the logits are not finite");
  double sum = 0;
  for (int64_t j = 0; j < n; ++j) sum += std::exp(static_cast<double>(logits[j]) - mx);
  const double lse = mx + std::log(sum);
  for (int64_t j = 0; j < n; ++j)
    out[static_cast<size_t>(j)] = static_cast<double>(logits[j]) - lse;
}

int64_t argmax(const std::vector<double>& v) {
  LLMCTL_ASSERT(!v.empty());
  int64_t best = 0;
  for (size_t j = 1; j < v.size(); ++j)
    if (v[j] > v[static_cast<size_t>(best)]) best = static_cast<int64_t>(j);
  return best;
}

void append_top_k(const std::vector<double>& logp, BaseTopK& dst) {
  const auto n = static_cast<int64_t>(logp.size());
  LLMCTL_ASSERT(dst.k >= 1 && dst.k <= n);
  std::vector<int32_t> order(logp.size());
  std::iota(order.begin(), order.end(), 0);
  const auto by_prob = [&logp](int32_t a, int32_t b) {
    const double pa = logp[static_cast<size_t>(a)], pb = logp[static_cast<size_t>(b)];
    return pa > pb || (pa == pb && a < b);
  };
  std::partial_sort(order.begin(), order.begin() + dst.k, order.end(), by_prob);
  for (int i = 0; i < dst.k; ++i) {
    const int32_t id = order[static_cast<size_t>(i)];
    dst.ids.push_back(id);
    dst.logp.push_back(logp[static_cast<size_t>(id)]);
  }
  // The tail summed from its own terms rather than as 1 - sum(top-K): exact to rounding even
  // when it is tiny.
  double tail = 0;
  for (size_t i = static_cast<size_t>(dst.k); i < order.size(); ++i)
    tail += std::exp(logp[static_cast<size_t>(order[i])]);
  dst.tail.push_back(tail);
}

PositionComparison compare_to_base(const BaseTopK& base, int64_t pos,
                                   const std::vector<double>& model_logp) {
  LLMCTL_ASSERT(pos >= 0 && pos < base.n_positions());
  const size_t off = static_cast<size_t>(pos) * static_cast<size_t>(base.k);
  double kl = 0;
  for (int i = 0; i < base.k; ++i) {
    const auto id = static_cast<size_t>(base.ids[off + static_cast<size_t>(i)]);
    LLMCTL_ASSERT(id < model_logp.size());
    const double lp = base.logp[off + static_cast<size_t>(i)];
    kl += std::exp(lp) * (lp - model_logp[id]);
  }
  // Q_tail from the model's own terms; 1 - sum(top-K q) would cancel catastrophically.
  double q_tail = 0;
  {
    std::vector<bool> in_top(model_logp.size(), false);
    for (int i = 0; i < base.k; ++i) in_top[static_cast<size_t>(base.ids[off + size_t(i)])] = true;
    for (size_t j = 0; j < model_logp.size(); ++j)
      if (!in_top[j]) q_tail += std::exp(model_logp[j]);
  }
  const double p_tail = base.tail[static_cast<size_t>(pos)];
  if (p_tail > 0)
    kl += p_tail *
          (std::log(p_tail) - std::log(std::max(q_tail, std::numeric_limits<double>::min())));

  PositionComparison c;
  // Rounding can leave a KL of exactly equal distributions at -1e-17; clamp to the true range.
  c.kl = std::max(kl, 0.0);
  const auto base_top = static_cast<size_t>(base.ids[off]);
  c.same_top = static_cast<size_t>(argmax(model_logp)) == base_top;
  c.delta_p = std::exp(model_logp[base_top]) - std::exp(base.logp[off]);
  return c;
}

double percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double at = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(at));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = at - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

Distribution summarize(std::vector<double> values) {
  Distribution d;
  if (values.empty()) return d;
  d.n = static_cast<int64_t>(values.size());
  d.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(d.n);
  std::sort(values.begin(), values.end());
  d.median = percentile(values, 0.5);
  d.p99 = percentile(values, 0.99);
  d.max = values.back();
  return d;
}

}  // namespace llmctl
