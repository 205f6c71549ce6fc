#pragma once
// Attention-score statistics of a run (`llmctl run --attn-stats`): a ForwardObserver that
// folds the per (token, head) statistics the backend reduces inside its attention kernel
// (Backend::attention_with_stats, AttnStat in backend.h) into one record per (layer, head),
// tracks the residual stream's abs-max per layer, and remembers the first alert (in the order
// below).
//
// Everything is aggregated over every query token the forward pass computes, prompt and
// generated alike (the last generated token is never fed back, so it is not included).
// Sums are kept in double: a run adds up n_tokens * positions scores per head.
//
// Alert: of all the events
//   * a NaN or +-Inf score (before or after a soft-cap),
//   * a NaN or +-Inf value in the residual stream after a layer (or in the embeddings),
//   * only when a threshold is given (--attn-alert T): a finite scaled score above it (the max
//     of a (token, head) > T),
// the first in the order (layer, scores before the residual, position, head): the lowest
// layer that shows the problem (the embeddings first), at its earliest position. Within one
// chunk that is the order the forward pass produces them in; over several it does not depend
// on how the tokens were split into chunks or batched with other sequences (`run --batch`
// reports per request what a run of the request alone reports), and a NaN is named where it
// first appears in the layer stack, not where a later token happened to meet it.
//
// Why no score threshold by default: every overflow in the arithmetic the engine uses shows up
// as a NaN or an Inf. Scores are f32 (a score overflows at 3.4e38, as +-Inf); the softmax
// subtracts the row's max before exp, so it cannot overflow at any score; an f16 KV cache
// stores a K or V element beyond 65504 as +-Inf (core/fp16.h), which makes the scores or the
// attention output (and so the residual) non-finite; a soft-cap turns an Inf score into a
// finite +-cap, so the scores before the cap are counted too. Large finite scores are normal
// in real models (SmolLM2-135M: 16.5 in layer 7 on a short prompt). What they do risk is
// reported as information: fp16_risk counts the (token, head) rows whose max score exceeds
// ln(65504) = 11.09, where a softmax that exponentiates in fp16 before subtracting the max
// (a naive kernel; not llmctl's) would overflow.

#include <cstdint>
#include <optional>
#include <vector>

#include "model/forward_observer.h"

namespace llmctl {

// One (layer, head) over all its query tokens; also used for a whole layer (heads merged).
struct AttnHeadStats {
  double max = 0;  // valid when n_finite > 0
  double min = 0;
  double sum = 0;     // of the finite scores
  double sum_sq = 0;  // of the finite scores, squared
  int64_t n_finite = 0;
  int64_t n_nan = 0;
  int64_t n_inf = 0;
  int64_t n_queries = 0;           // (token, head) rows folded in
  double entropy_sum = 0;          // softmax entropies (nats) of the rows where it is finite
  int64_t n_entropy = 0;           // rows with a finite entropy
  double uniform_entropy_sum = 0;  // ln(positions attended) of those rows: the uniform maximum
  int64_t max_head = -1;           // for a merged layer: the head holding max
  int64_t max_pos = -1;            // sequence position of the query holding max
  // Before the soft-cap (the same as max/min without one; valid when n_raw_finite > 0).
  double raw_max = 0, raw_min = 0;
  int64_t n_raw_finite = 0;
  int64_t n_raw_nonfinite = 0;  // NaN or +-Inf before the cap
  int64_t n_fp16_risk = 0;      // rows whose max score > kFp16SoftmaxLimit

  double mean() const;          // of the finite scores; NaN when there are none
  double std() const;           // population standard deviation of the finite scores; NaN when none
  double mean_entropy() const;  // NaN when no row had a finite entropy
  double mean_uniform_entropy() const;  // NaN likewise
  // Folds `o` in (max_head taken from whichever holds the larger max).
  void merge(const AttnHeadStats& o);
};

// The residual stream x (n_tokens, n_embd) after one layer, over every token.
struct ResidualStats {
  double abs_max = 0;  // over the finite values
  int64_t abs_max_pos = -1;
  int64_t n_nonfinite = 0;  // NaN or +-Inf values
};

// ln(65504): exp of a larger score overflows fp16 (a softmax that does not subtract the max).
inline constexpr double kFp16SoftmaxLimit = 11.089866488461016;

// Where the fp16 risk first appears (the lowest layer, then position, then head) and how often.
struct Fp16Risk {
  int64_t rows = 0;                         // (token, head) rows with max score > kFp16SoftmaxLimit
  int64_t of_rows = 0;                      // all (token, head) rows of all layers
  double largest = 0;                       // the largest such max (valid when rows > 0)
  int64_t layer = -1, head = -1, pos = -1;  // the first such row
};

struct AttnAlert {
  enum class Kind { ScoreMax, NonFiniteScore, NonFiniteResidual };
  Kind kind = Kind::ScoreMax;
  int64_t layer = 0;  // -1: the embeddings (NonFiniteResidual only)
  int64_t head = -1;  // -1 for NonFiniteResidual
  int64_t pos = 0;    // sequence position of the query token
  int32_t token = 0;  // its id
  double value = 0;   // ScoreMax: the max; otherwise the number of non-finite values
};
const char* attn_alert_kind_name(AttnAlert::Kind k);  // "score_max", "nonfinite_score", ...

class AttnStatsCollector final : public ForwardObserver {
 public:
  // alert_threshold: scaled-score max above which an alert fires (finite), or none (the
  // default: only non-finite values alert). softcap: the model's attention soft-cap (0: none),
  // so that the table shows the scores before it too.
  AttnStatsCollector(int64_t n_layers, int64_t n_heads,
                     std::optional<double> alert_threshold = std::nullopt, double softcap = 0.0);

  bool wants_attention_stats() const override { return true; }
  bool wants_residual() const override { return true; }
  void on_attention_stats(int64_t layer, const ObservedBatch& batch, const float* stats,
                          int64_t n_heads) override;
  void on_residual(int64_t layer, const ObservedBatch& batch, const float* x,
                   int64_t n_embd) override;

  int64_t n_layers() const { return n_layers_; }
  int64_t n_heads() const { return n_heads_; }
  const std::optional<double>& alert_threshold() const { return threshold_; }
  double softcap() const { return softcap_; }
  Fp16Risk fp16_risk() const;
  const AttnHeadStats& head(int64_t layer, int64_t h) const;
  AttnHeadStats layer(int64_t layer) const;  // the layer's heads merged
  // layer -1 is the embeddings.
  const ResidualStats& residual(int64_t layer) const;
  // The lowest layer whose residual held a non-finite value (-1: the embeddings already).
  std::optional<int64_t> first_nonfinite_residual_layer() const;
  const std::optional<AttnAlert>& alert() const { return alert_; }
  // Query tokens seen (per layer; every layer sees the same tokens).
  int64_t n_tokens() const { return n_tokens_; }

 private:
  // Keeps `a` when it comes before the alert so far in the order above.
  void raise(const AttnAlert& a);
  int64_t n_layers_, n_heads_;
  std::optional<double> threshold_;
  double softcap_;
  Fp16Risk fp16_first_;  // layer/head/pos of the first risky row (rows, largest: fp16_risk())
  std::vector<AttnHeadStats> heads_;     // (n_layers, n_heads)
  std::vector<ResidualStats> residual_;  // n_layers + 1, embeddings first
  std::optional<AttnAlert> alert_;
  int64_t n_tokens_ = 0;
};

}  // namespace llmctl
