#pragma once
// The Llama forward pass, written once against Backend& (it never constructs a backend).
//
// One token at position p = cache.n_past():
//   x = token_embd[token]                                   (n_embd,)
//   for each layer:
//     h = rmsnorm(x) * attn_norm
//     q = wq h (+bq), k = wk h (+bk), v = wv h (+bv)        (q_dim,), (kv_dim,), (kv_dim,)
//     rope(q), rope(k) at p;  cache[layer][p] = k, v
//     x += wo attention(q, cache[layer][0..p])
//     h = rmsnorm(x) * ffn_norm
//     x += w_down (silu(w_gate h) * (w_up h))
//   logits = output (rmsnorm(x) * output_norm)               (n_vocab,)
// Prefill in this slice is the same step once per prompt token.

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "model/config.h"
#include "model/kv_cache.h"
#include "model/weights.h"

namespace llmctl {

class Forward {
 public:
  // Binds the weights to `backend` and allocates activations and a cache of n_ctx positions
  // (n_ctx >= 1; it may exceed the training context). `backend` must outlive this object.
  Forward(const ModelConfig& config, const ModelWeights& weights, Backend& backend, int64_t n_ctx);

  // Runs `token` at position n_past() and returns its logits (n_vocab floats, valid until
  // the next step). Throws Error for a token outside [0, n_vocab) or a full cache.
  const std::vector<float>& step(int32_t token);

  int64_t n_past() const { return cache_.n_past(); }
  // Starts a new sequence.
  void reset() { cache_.clear(); }

 private:
  ModelConfig config_;
  Backend& backend_;
  ModelWeights weights_;  // bound to backend_
  KvCache cache_;
  RopeParams rope_;
  AttentionShape attn_;
  // Activations (one token).
  Buffer x_, h_, q_, k_, v_, att_, proj_, gate_, up_, ffn_, logits_;
  std::vector<float> logits_host_;
};

}  // namespace llmctl
