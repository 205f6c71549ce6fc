#pragma once
// Router statistics of a mixture-of-experts run (`llmctl run --moe-stats`): a ForwardObserver
// on on_moe_routing() that folds, per layer with experts, every token the forward pass routes
// (prompt and generated alike; the last generated token is never fed back):
//   * expert_tokens[e]  how many tokens chose expert e among their k (each token counts once
//                       per expert it chose, so the counts add up to tokens * k);
//   * entropy           of the router's softmax over all n_expert experts, in nats, mean over
//                       tokens: ln(n_expert) when the router cannot tell the experts apart, 0
//                       when it puts all its mass on one;
//   * top_k_mass        the softmax probability of the k chosen experts, summed, mean over
//                       tokens: the share of the router's mass the layer's output keeps (before
//                       Mixtral's and Qwen3-MoE's renormalisation; Qwen2-MoE uses it as is);
//   * never chosen      the experts with expert_tokens 0;
//   * max_load          the busiest expert's count over the uniform count tokens * k / n_expert
//                       (1: perfectly balanced; n_expert / k: every token chose the same k).
// The softmax is recomputed here in double from the logits the router matmul gave (the same
// logits moe_route ranked); the ids are the ones the engine used. A row holding a NaN or +Inf
// logit (or only -Inf ones) has no entropy or mass: it is counted in nonfinite_rows, its ids
// still count. `run --batch` gives each request its own collector through a SequenceRouter,
// so a request's figures are those of a run of it alone (routing is batch-invariant).

#include <cstdint>
#include <vector>

#include "model/forward_observer.h"

namespace llmctl {

struct MoeLayerStats {
  int64_t n_tokens = 0;                // tokens routed through this layer
  std::vector<int64_t> expert_tokens;  // n_expert counts
  double entropy_sum = 0;              // over the finite rows, nats
  double top_k_mass_sum = 0;           // over the finite rows
  int64_t n_finite = 0;                // rows with an entropy and a mass
  int64_t n_nonfinite = 0;             // rows with NaN / +Inf logits (or only -Inf)

  double mean_entropy() const;     // NaN when no row was finite
  double mean_top_k_mass() const;  // NaN likewise
  // Busiest count / (n_tokens * k / n_expert); NaN before any token.
  double max_load(int64_t k) const;
  std::vector<int32_t> never_chosen() const;  // ascending
};

class MoeStatsCollector final : public ForwardObserver {
 public:
  // n_expert experts per layer with experts, k of them chosen per token (the model's
  // expert_count and expert_used_count). Layers never routed (dense ones) stay empty.
  MoeStatsCollector(int64_t n_layers, int64_t n_expert, int64_t k);

  bool wants_moe_routing() const override { return true; }
  void on_moe_routing(int64_t layer, const ObservedBatch& batch, const float* logits,
                      int64_t n_expert, const int32_t* ids, const float* weights,
                      int64_t k) override;

  int64_t n_layers() const { return static_cast<int64_t>(layers_.size()); }
  int64_t n_expert() const { return n_expert_; }
  int64_t k() const { return k_; }
  const MoeLayerStats& layer(int64_t l) const;
  bool routed(int64_t l) const { return layer(l).n_tokens > 0; }
  // Tokens seen (the most any layer routed: every layer with experts sees the same tokens).
  int64_t n_tokens() const;

 private:
  int64_t n_expert_, k_;
  std::vector<MoeLayerStats> layers_;
};

// The entropy (nats) of softmax(logits[0 .. n)) and the probability mass of the experts
// ids[0 .. k), in double; false (outputs untouched) for a row with a NaN or +Inf logit or no
// finite one. Exposed for the tests.
bool router_entropy_and_mass(const float* logits, int64_t n, const int32_t* ids, int64_t k,
                             double* entropy, double* mass);

}  // namespace llmctl
