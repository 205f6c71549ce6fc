// One observer in front of several (observer_fanout.h).
#include "diag/observer_fanout.h"

#include <algorithm>

namespace llmctl {

bool ObserverFanout::wants_attention_stats() const {
  return std::any_of(observers_.begin(), observers_.end(),
                     [](const ForwardObserver* o) { return o->wants_attention_stats(); });
}

bool ObserverFanout::wants_residual() const {
  return std::any_of(observers_.begin(), observers_.end(),
                     [](const ForwardObserver* o) { return o->wants_residual(); });
}

bool ObserverFanout::wants_matmul_inputs() const {
  return std::any_of(observers_.begin(), observers_.end(),
                     [](const ForwardObserver* o) { return o->wants_matmul_inputs(); });
}

bool ObserverFanout::wants_moe_routing() const {
  return std::any_of(observers_.begin(), observers_.end(),
                     [](const ForwardObserver* o) { return o->wants_moe_routing(); });
}

void ObserverFanout::on_attention_stats(int64_t layer, const ObservedBatch& batch,
                                        const float* stats, int64_t n_heads) {
  for (ForwardObserver* o : observers_)
    if (o->wants_attention_stats()) o->on_attention_stats(layer, batch, stats, n_heads);
}

void ObserverFanout::on_residual(int64_t layer, const ObservedBatch& batch, const float* x,
                                 int64_t n_embd) {
  for (ForwardObserver* o : observers_)
    if (o->wants_residual()) o->on_residual(layer, batch, x, n_embd);
}

void ObserverFanout::on_matmul_input(const WeightView& w, const ObservedBatch& batch,
                                     const float* x, int64_t n_rows) {
  for (ForwardObserver* o : observers_)
    if (o->wants_matmul_inputs()) o->on_matmul_input(w, batch, x, n_rows);
}

void ObserverFanout::on_moe_routing(int64_t layer, const ObservedBatch& batch,
                                    const float* logits, int64_t n_expert, const int32_t* ids,
                                    const float* weights, int64_t k) {
  for (ForwardObserver* o : observers_)
    if (o->wants_moe_routing()) o->on_moe_routing(layer, batch, logits, n_expert, ids, weights, k);
}

}  // namespace llmctl
