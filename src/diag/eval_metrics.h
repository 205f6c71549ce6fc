#pragma once
// The arithmetic of `llmctl eval`, apart from any model: log-softmax, the base model's
// top-K summary of a next-token distribution, the KL divergence and agreement measures
// computed from it, and the summary statistics. Everything in double.
//
// Memory: the base model's distribution at each scored position is kept only as its K most
// likely tokens (id, log p) and the tail mass P_tail = sum of p over the other tokens, i.e.
// K * 12 + 8 bytes per position instead of n_vocab * 4.
//
// KL(base || model) at one position, from that summary (p: base, q: model, T: top-K ids):
//   KL_K = sum_{i in T} p_i (log p_i - log q_i) + P_tail (log P_tail - log Q_tail)
//   Q_tail = sum_{j not in T} q_j (summed directly from the model's full distribution)
// The tail terms of the full KL are merged into one bucket; by the log-sum inequality
//   sum_{j not in T} p_j log(p_j / q_j) >= P_tail log(P_tail / Q_tail),
// so KL_K is a lower bound of the full KL, equal to it when K = n_vocab (empty tail, term 0).

#include <cstdint>
#include <vector>

namespace llmctl {

// out[j] = logits[j] - log(sum_k exp(logits[k])), in double (n values).
void log_softmax(const float* logits, int64_t n, std::vector<double>& out);

// The base model's top-K summary of every scored position, in scoring order.
struct BaseTopK {
  int k = 0;                 // tokens kept per position (<= n_vocab)
  std::vector<int32_t> ids;  // (n_positions, k), most likely first (ties: lower id first)
  std::vector<double> logp;  // (n_positions, k), log p of ids (double: a float rounds
                             // log p by ~6e-8, which is 10% of a Q8_0-sized KL of 6e-4)
  std::vector<double> tail;  // (n_positions,), P_tail: probability of all other tokens
  int64_t n_positions() const { return static_cast<int64_t>(tail.size()); }
};

// Appends one position's top-k summary of the distribution logp (n values, a log-softmax).
void append_top_k(const std::vector<double>& logp, BaseTopK& dst);

// How the model's distribution at one position compares with the base's summary.
struct PositionComparison {
  double kl = 0;          // KL_K above, nats
  bool same_top = false;  // the model's most likely token is the base's (ties: lower id)
  double delta_p = 0;     // q(base top) - p(base top)
};
// model_logp: the model's log-softmax (n_vocab values) at position `pos` of `base`.
PositionComparison compare_to_base(const BaseTopK& base, int64_t pos,
                                   const std::vector<double>& model_logp);

// Index of the largest value (the lowest index among equal ones).
int64_t argmax(const std::vector<double>& v);

// Mean, median and 99th percentile of a sample. Percentiles interpolate linearly between
// order statistics, as numpy.percentile's default ("linear"): the q-quantile of n sorted
// values is at fractional index q * (n - 1).
struct Distribution {
  double mean = 0, median = 0, p99 = 0, max = 0;
  int64_t n = 0;
};
Distribution summarize(std::vector<double> values);  // all zero for an empty sample
double percentile(const std::vector<double>& sorted, double q);

}  // namespace llmctl
