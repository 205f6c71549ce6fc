#pragma once
// SequenceRouter: a ForwardObserver for a batch of many sequences (`llmctl run --batch`) that
// hands each sequence's tokens to that sequence's own observer, so per-request diagnostics
// (an AttnStatsCollector per request) see exactly the tokens a run of the request alone sees.
//
// Every observed chunk is split into runs of consecutive tokens of one sequence
// (ObservedBatch::seq); each run goes to the observer bound to that sequence as a smaller
// ObservedBatch with the matching rows of the statistics or residual, in chunk order. The
// scheduler puts a sequence's tokens of one step next to each other and its steps in position
// order, so a bound observer receives its tokens in position order, as when run alone. Tokens
// of a sequence with no observer bound are dropped.
//
// Forwarded: attention statistics, the residual stream and the router's choices (what
// per-token diagnostics need), each asked for when a bound observer wants it. Not forwarded:
// matmul inputs (the output projection's rows are logits rows, not tokens).

#include <cstdint>
#include <map>

#include "model/forward_observer.h"

namespace llmctl {

class SequenceRouter final : public ForwardObserver {
 public:
  // Routes seq's tokens to `observer` (not owned; it must outlive the binding) from the next
  // chunk on, replacing an earlier binding of seq (sequence ids are reused).
  void bind(int32_t seq, ForwardObserver* observer);
  void unbind(int32_t seq);

  bool wants_attention_stats() const override;
  bool wants_residual() const override;
  bool wants_moe_routing() const override;
  void on_attention_stats(int64_t layer, const ObservedBatch& batch, const float* stats,
                          int64_t n_heads) override;
  void on_residual(int64_t layer, const ObservedBatch& batch, const float* x,
                   int64_t n_embd) override;
  void on_moe_routing(int64_t layer, const ObservedBatch& batch, const float* logits,
                      int64_t n_expert, const int32_t* ids, const float* weights,
                      int64_t k) override;

 private:
  // Calls fn(observer, sub_batch, first_token) once per run of one bound sequence.
  template <typename Fn>
  void for_each_run(const ObservedBatch& batch, Fn&& fn) const;
  // Whether any bound observer gives true for `wants`.
  template <typename Wants>
  bool any_bound(Wants&& wants) const;

  std::map<int32_t, ForwardObserver*> bound_;
};

}  // namespace llmctl
