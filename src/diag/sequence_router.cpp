// Splitting observed chunks by sequence (sequence_router.h).
#include "diag/sequence_router.h"

#include "backend/backend.h"

namespace llmctl {

void SequenceRouter::bind(int32_t seq, ForwardObserver* observer) { bound_[seq] = observer; }

void SequenceRouter::unbind(int32_t seq) { bound_.erase(seq); }

template <typename Wants>
bool SequenceRouter::any_bound(Wants&& wants) const {
  for (const auto& entry : bound_)
    if (wants(*entry.second)) return true;
  return false;
}

bool SequenceRouter::wants_attention_stats() const {
  return any_bound([](const ForwardObserver& o) { return o.wants_attention_stats(); });
}

bool SequenceRouter::wants_residual() const {
  return any_bound([](const ForwardObserver& o) { return o.wants_residual(); });
}

bool SequenceRouter::wants_moe_routing() const {
  return any_bound([](const ForwardObserver& o) { return o.wants_moe_routing(); });
}

template <typename Fn>
void SequenceRouter::for_each_run(const ObservedBatch& batch, Fn&& fn) const {
  int64_t begin = 0;
  while (begin < batch.n_tokens) {
    const int32_t seq = batch.seq[begin];
    int64_t end = begin + 1;
    while (end < batch.n_tokens && batch.seq[end] == seq) ++end;
    const auto it = bound_.find(seq);
    if (it != bound_.end()) {
      const ObservedBatch run{end - begin, batch.seq + begin, batch.pos + begin,
                              batch.token + begin};
      fn(*it->second, run, begin);
    }
    begin = end;
  }
}

// stats (n_tokens, n_heads, kAttnStatFields): a run's rows start at its first token's row.
void SequenceRouter::on_attention_stats(int64_t layer, const ObservedBatch& batch,
                                        const float* stats, int64_t n_heads) {
  for_each_run(batch, [&](ForwardObserver& o, const ObservedBatch& run, int64_t first) {
    o.on_attention_stats(layer, run, stats + first * n_heads * kAttnStatFields, n_heads);
  });
}

// x (n_tokens, n_embd).
void SequenceRouter::on_residual(int64_t layer, const ObservedBatch& batch, const float* x,
                                 int64_t n_embd) {
  for_each_run(batch, [&](ForwardObserver& o, const ObservedBatch& run, int64_t first) {
    o.on_residual(layer, run, x + first * n_embd, n_embd);
  });
}


// logits (n_tokens, n_expert), ids and weights (n_tokens, k).
void SequenceRouter::on_moe_routing(int64_t layer, const ObservedBatch& batch,
                                    const float* logits, int64_t n_expert, const int32_t* ids,
                                    const float* weights, int64_t k) {
  for_each_run(batch, [&](ForwardObserver& o, const ObservedBatch& run, int64_t first) {
    o.on_moe_routing(layer, run, logits + first * n_expert, n_expert, ids + first * k,
                     weights + first * k, k);
  });
}

}  // namespace llmctl
