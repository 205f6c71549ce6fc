#pragma once
// The observer hook (ARCHITECTURE.md "The backend seam"): how diagnostics see inside a forward
// pass without the forward pass knowing about them. Forward (forward.h) calls an observer only
// when one is set; without one a pass does no extra work, and what an observer receives is
// computed by the same kernels that serve `run` (attention statistics come from the backend's
// attention_with_stats(), reduced on the device for CUDA).
//
// Everything handed to an observer is in host memory and valid only during the call. Calls
// come in order: for each chunk of a decode() batch, on_residual(-1) for the embeddings, then
// per layer on_matmul_input() for the layer's matmuls in forward order (attn_q, attn_k,
// attn_v, attn_output, ffn_gate, ffn_up, ffn_down), on_attention_stats(layer),
// on_moe_routing(layer) (models with experts, after the router) and on_residual(layer) after
// the layer's residual adds; finally on_matmul_input() for the output projection of the rows
// whose logits were asked for.
//
// An observer may also change one thing about a pass: the positions RoPE rotates by
// (maps_rope_positions, for rope-probe's experiments on positional encoding).

#include <cstdint>

#include "backend/backend.h"

namespace llmctl {

// The tokens of one forward chunk, per token t < n_tokens: its sequence, its position in the
// sequence (the cache position, before any RoPE position mapping) and its id.
struct ObservedBatch {
  int64_t n_tokens = 0;
  const int32_t* seq = nullptr;
  const int32_t* pos = nullptr;
  const int32_t* token = nullptr;
};

class ForwardObserver {
 public:
  virtual ~ForwardObserver() = default;

  // What to compute and hand over; asked once per chunk. Each costs a download per layer.
  virtual bool wants_attention_stats() const { return false; }
  virtual bool wants_residual() const { return false; }
  virtual bool wants_matmul_inputs() const { return false; }
  virtual bool wants_moe_routing() const { return false; }
  // Whether RoPE rotates the chunk's tokens by rope_position() instead of their cache
  // positions; asked once per chunk. Attention still covers cache positions 0 .. pos; only the
  // rotation changes. Forward throws Error for a mapped position outside [0, 2^31).
  virtual bool maps_rope_positions() const { return false; }
  // The RoPE position of sequence `seq`'s token at cache position `pos`.
  virtual int64_t rope_position(int32_t /*seq*/, int64_t pos) const { return pos; }

  // Layer `layer`'s attention statistics: stats (n_tokens, n_heads, kAttnStatFields), see
  // AttnStat in backend.h.
  virtual void on_attention_stats(int64_t /*layer*/, const ObservedBatch& /*batch*/,
                                  const float* /*stats*/, int64_t /*n_heads*/) {}
  // The residual stream x (n_tokens, n_embd) after layer `layer` (-1: the embeddings).
  virtual void on_residual(int64_t /*layer*/, const ObservedBatch& /*batch*/, const float* /*x*/,
                           int64_t /*n_embd*/) {}
  // The input x (n_rows, w.n_cols) of a matmul with weight `w` (w.name is its GGUF tensor
  // name). For the output projection, the rows are the logits rows, and batch is the chunk.
  virtual void on_matmul_input(const WeightView& /*w*/, const ObservedBatch& /*batch*/,
                               const float* /*x*/, int64_t /*n_rows*/) {}
  // Layer `layer`'s router (models with experts): logits (n_tokens, n_expert) as the router
  // matmul gave them (before the softmax), and what moe_route made of them: each token's k
  // experts ids (n_tokens, k) in rank order and their weights (n_tokens, k).
  virtual void on_moe_routing(int64_t /*layer*/, const ObservedBatch& /*batch*/,
                              const float* /*logits*/, int64_t /*n_expert*/,
                              const int32_t* /*ids*/, const float* /*weights*/, int64_t /*k*/) {}
};

}  // namespace llmctl
