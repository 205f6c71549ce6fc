#pragma once
// The routed feed-forward block of a mixture-of-experts layer (arch.h MoeRow), written against
// Backend& like the rest of the forward pass (forward.h), as llama.cpp's build_moe_ffn computes
// it:
//   logits = h ffn_gate_inp^T (+ ffn_gate_inp.bias)             (n, n_experts)
//   ids, w = moe_route(logits, k, normalize)                    (n, k) each; normalize per the
//            row's gating and norm_w (core/moe_gating.h)
//   f_t    = sum_r w[t, r] * down_e(act(gate_e(h_t), up_e(h_t))),  e = ids[t, r]
//   (act: silu(g) * u, or swiglu_oai for gpt-oss, whose gate_e, up_e, down_e add biases)
//   (gated shared expert: f += sigmoid(h . ffn_gate_inp_shexp) * down_s(silu(gate_s h) * up_s h))
// The batch's n * k (token, rank) slots are sorted by expert on the host (the ids are
// downloaded once per layer: a host sync mid-step, so a chunk with experts is never recorded as
// a device graph), then each chosen expert runs once on the rows of all its tokens: its
// weights are read once per chunk however many tokens chose it. Every row's result depends on
// its own token alone (gather, per-row matmuls, scatter, combine in rank order), so the
// backend's batch and thread invariance carries over.

#include <cstdint>
#include <functional>
#include <vector>

#include "backend/backend.h"
#include "model/config.h"
#include "model/forward_observer.h"
#include "model/weights.h"

namespace llmctl {

class MoeFfn {
 public:
  // The forward pass's matmul (it shows inputs to an observer first): used for the router and
  // the shared expert. The experts' matmuls go to the backend directly: their inputs are
  // gathered rows of some tokens, not the chunk's rows an observer is told of (an importance
  // matrix per expert, as llama-imatrix keeps, is not collected).
  using Matmul = std::function<void(const WeightView& w, const Buffer& x, int64_t n, Buffer& out)>;

  MoeFfn() = default;
  // Throws Error when `c` has experts and `b` lacks the MoE ops (Backend::supports_moe()):
  // the forward pass asks before it binds any weight.
  static void check_backend(const Backend& b, const ModelConfig& c);
  // Scratch for batches of up to max_batch tokens (nothing without experts); bytes() is its
  // size.
  void allocate(Backend& b, const ModelConfig& c, int64_t max_batch);
  uint64_t bytes() const { return bytes_; }

  // out (n, n_embd) = the block's output for h (n, n_embd); `l` as split_fused_layer gives it
  // (l.experts filled). `observer` (may be null) gets on_moe_routing(layer) when it wants it;
  // `batch` is what it is told of the chunk.
  void run(Backend& b, const Matmul& matmul, const LayerWeights& l, const Buffer& h, int64_t n,
           Buffer& out, int64_t layer, ForwardObserver* observer, const ObservedBatch& batch);

 private:
  ModelConfig c_;
  uint64_t bytes_ = 0;
  Buffer logits_, ids_, weights_, slots_;  // router: (n, n_experts), (n, k) x2, (n * k) I32
  Buffer x_, gate_, up_, y_, y_slots_;     // one expert's rows, then every slot's output row
  Buffer shared_gate_, shared_up_, shared_out_, shared_scale_;  // the gated shared expert
  std::vector<int32_t> host_ids_, host_slots_;
  std::vector<int64_t> expert_begin_;  // host_slots_ of expert e: [begin[e], begin[e + 1])
  std::vector<int64_t> expert_next_;   // the sort's cursor per expert
  std::vector<float> host_logits_, host_weights_;  // for the observer
};

}  // namespace llmctl
