#pragma once
// ObserverFanout: one ForwardObserver that hands every call to several (a run with both
// --attn-stats and --moe-stats sets one observer on the forward pass). It wants what any of
// them wants, and passes each call only to those that asked for it, in the order added.

#include <cstdint>
#include <vector>

#include "model/forward_observer.h"

namespace llmctl {

class ObserverFanout final : public ForwardObserver {
 public:
  // `o` is not owned and must outlive the fanout's use.
  void add(ForwardObserver* o) { observers_.push_back(o); }
  bool empty() const { return observers_.empty(); }

  bool wants_attention_stats() const override;
  bool wants_residual() const override;
  bool wants_matmul_inputs() const override;
  bool wants_moe_routing() const override;
  void on_attention_stats(int64_t layer, const ObservedBatch& batch, const float* stats,
                          int64_t n_heads) override;
  void on_residual(int64_t layer, const ObservedBatch& batch, const float* x,
                   int64_t n_embd) override;
  void on_matmul_input(const WeightView& w, const ObservedBatch& batch, const float* x,
                       int64_t n_rows) override;
  void on_moe_routing(int64_t layer, const ObservedBatch& batch, const float* logits,
                      int64_t n_expert, const int32_t* ids, const float* weights,
                      int64_t k) override;

 private:
  std::vector<ForwardObserver*> observers_;
};

}  // namespace llmctl
