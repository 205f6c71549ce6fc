#pragma once
// What the rope-probe probes share: a Forward pass built for one RoPE configuration that runs
// one token sequence at a time (f32 KV cache, so the probes measure RoPE and not f16 cache
// rounding), and the metrics between next-token distributions.

#include <cstdint>
#include <functional>
#include <vector>

#include "backend/backend.h"
#include "model/config.h"
#include "model/forward.h"
#include "model/weights.h"

namespace llmctl {

// The positions RoPE rotates a sequence's tokens by, for experiments on positional encoding:
// the token at cache position p is rotated for position offset + p, or for 0 when all_zero.
// Attention still covers cache positions 0 .. p; only the rotation changes.
struct RopePositions {
  int64_t offset = 0;
  bool all_zero = false;
};

// RopePositions for one sequence, as the observer hook that maps Forward's RoPE positions
// (forward_observer.h); it observes nothing else.
class RopePositionMap final : public ForwardObserver {
 public:
  RopePositionMap(int32_t seq, RopePositions pos) : seq_(seq), pos_(pos) {}
  bool maps_rope_positions() const override { return true; }
  int64_t rope_position(int32_t seq, int64_t pos) const override {
    if (seq != seq_) return pos;
    return pos_.all_zero ? 0 : pos_.offset + pos;
  }

 private:
  int32_t seq_;
  RopePositions pos_;
};

class RopeRunner {
 public:
  // Sequences of up to max_len tokens under `config` (a copy; variants change its RoPE fields).
  RopeRunner(const ModelConfig& config, const ModelWeights& weights, Backend& backend,
             int64_t max_len);
  // Logits of every position (ids.size(), n_vocab) row-major when all_rows, else of the last
  // position only (n_vocab,). Throws Error for more than max_len tokens or a RoPE offset that
  // does not fit 32-bit positions.
  std::vector<float> logits(const std::vector<int32_t>& ids, RopePositions pos, bool all_rows);
  // Mean over i >= 1 of -log p(ids[i] | ids[0..i)) in nats (ids.size() >= 2).
  double mean_nll(const std::vector<int32_t>& ids);
  int64_t n_vocab() const { return n_vocab_; }

 private:
  // Calls row(i, logits of position i) for every wanted position, in order.
  void run(const std::vector<int32_t>& ids, RopePositions pos, bool all_rows,
           const std::function<void(int64_t, const float*)>& row);

  int64_t max_len_;
  int64_t n_vocab_;
  Forward fwd_;
};

// KL(P || Q) in nats, P = softmax(p_logits), Q = softmax(q_logits), computed in double. n >= 1.
double kl_nats(const float* p_logits, const float* q_logits, int64_t n);
// max_i |a[i] - b[i]|.
double max_abs_diff(const float* a, const float* b, int64_t n);
// log softmax(logits)[id] in double.
double log_prob(const float* logits, int64_t n, int32_t id);
// How many tokens have a larger logit than `id` (0: the most likely).
int64_t rank_of(const float* logits, int64_t n, int32_t id);

}  // namespace llmctl
