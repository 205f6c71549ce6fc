#pragma once
// ModelWeights: views of every weight tensor in place in the mapped GGUF file (no copies, no
// dequantization at load). Data only; bind_weights() fills and checks it.
//
// Shapes are written in ggml order [n_cols, n_rows] (shape[0] = row length), as GGUF stores
// them; a matmul computes W (n_rows, n_cols) @ x (n_cols,). The GgufFile must outlive the
// views.

#include <vector>

#include "backend/backend.h"
#include "model/config.h"

namespace llmctl {

class GgufFile;

// One layer's tensors. Which are present, their names and shape rules: kLayerTensors
// (arch.h); an absent one is !present().
struct LayerWeights {
  WeightView attn_norm;       // (n_embd,)                        F32
  WeightView wq;              // (n_embd, n_heads * head_dim)      ggml order
  WeightView wk;              // (n_embd, n_kv_heads * head_dim)
  WeightView wv;              // (n_embd, n_kv_heads * head_dim)
  WeightView wqkv;            // (n_embd, q_dim + 2 kv_dim)        fused_qkv instead of wq, wk, wv
  WeightView wo;              // (n_heads * head_dim, n_embd)
  WeightView bq;              // (n_heads * head_dim,)    F32, has_qkv_bias
  WeightView bk;              // (n_kv_heads * head_dim,) F32, has_qkv_bias
  WeightView bv;              // (n_kv_heads * head_dim,) F32, has_qkv_bias
  WeightView bo;              // (n_embd,)  F32, has_out_bias
  WeightView attn_sinks;      // (n_heads,) F32, has_attn_sinks
  WeightView attn_q_norm;     // (head_dim,) or (q_dim,)  F32, qk_norm PerHead / WholeVector
  WeightView attn_k_norm;     // (head_dim,) or (kv_dim,) F32
  WeightView attn_post_norm;  // (n_embd,)  F32, norms Post or Both
  WeightView ffn_norm;        // (n_embd,)                        F32
  WeightView w_gate;          // (n_embd, n_ff)
  WeightView w_up;            // (n_embd, n_ff)
  WeightView w_gate_up;       // (n_embd, 2 n_ff)  fused_gate_up instead of w_gate, w_up
  WeightView w_down;          // (n_ff, n_embd)
  WeightView ffn_post_norm;   // (n_embd,)  F32, norms Post or Both
  // Mixture of experts (n_experts > 0, arch.h MoeRow), in place of w_gate, w_up, w_down; the
  // 3-D tensors are views of n_experts * rows rows (expert e: rows [e rows, (e + 1) rows)).
  WeightView ffn_gate_inp;        // (n_embd, n_experts)                 the router
  WeightView ffn_gate_exps;       // (n_embd, n_ff_expert, n_experts)
  WeightView ffn_up_exps;         // (n_embd, n_ff_expert, n_experts)
  WeightView ffn_down_exps;       // (n_ff_expert, n_embd, n_experts)
  WeightView ffn_gate_inp_shexp;  // (n_embd,)  F32   the shared expert's gate, a 1-row matrix
  WeightView ffn_gate_shexp;      // (n_embd, n_ff_shared)   gated_shared_expert
  WeightView ffn_up_shexp;        // (n_embd, n_ff_shared)
  WeightView ffn_down_shexp;      // (n_ff_shared, n_embd)
  WeightView ffn_gate_inp_b;      // (n_experts,)  F32             moe_router_bias
  WeightView ffn_gate_exps_b;     // (n_ff_expert, n_experts) F32  moe_expert_biases
  WeightView ffn_up_exps_b;       // (n_ff_expert, n_experts) F32
  WeightView ffn_down_exps_b;     // (n_embd, n_experts) F32
  // Each expert's three matrices as row views of the 3-D tensors (split_fused_layer fills
  // them, the forward pass reads them; empty in bind_weights' result).
  // With moe_expert_biases, gate_b, up_b, down_b are its rows of the bias tensors.
  struct Expert {
    WeightView gate, up, down;
    WeightView gate_b, up_b, down_b;
  };
  std::vector<Expert> experts;
};

struct ModelWeights {
  WeightView token_embd;   // (n_embd, n_vocab)   rows are token embeddings
  WeightView output_norm;  // (n_embd,)           F32
  WeightView output;       // (n_embd, n_vocab)   = token_embd when output_tied
  bool output_tied = false;
  // (n_rot / 2,) F32 per-pair frequency divisors (Llama 3.1-style rope scaling):
  //   theta_i = pos * freq_scale * base^(-2i / n_rot) / rope_freqs[i].
  // GGUF: tensor 'rope_freqs.weight'; Hugging Face: computed from config.json rope_scaling
  // (rope_type "llama3"). Absent (!present()) when the model has none.
  WeightView rope_freqs;
  // LongRoPE's two sets of (n_rot / 2,) F32 divisors (config rope_longrope_orig_ctx): GGUF
  // 'rope_factors_long.weight' and 'rope_factors_short.weight'; Hugging Face: config.json
  // rope_scaling long_factor and short_factor. Absent without LongRoPE.
  WeightView rope_factors_long, rope_factors_short;
  std::vector<LayerWeights> layers;  // n_layers
  // The share of each routed expert tensor (ffn_*_exps) one token reads: n_experts_used /
  // n_experts (bind_weights sets it; 1 without experts). weight_stats' per-token figures.
  double expert_share = 1.0;
};

// Binds every tensor the config calls for. Matrices may be F32, F16, BF16, Q8_0, Q4_0 or Q4_1
// (rows whole blocks); norms and biases must be F32. Throws FileError naming the tensor with
// expected vs actual shape or type, e.g.
//   "tensor 'blk.3.attn_q.weight': expected [64, 64], got [64, 32]".
ModelWeights bind_weights(const GgufFile& file, const ModelConfig& config);

// The per-pair divisors a run of `n_ctx` positions uses: rope_freqs when present, else
// LongRoPE's long factors when n_ctx exceeds the original context, its short ones otherwise
// (as llama.cpp chooses them once per context); absent when the model has none.
const WeightView& rope_divisors_for(const ModelWeights& w, const ModelConfig& c, int64_t n_ctx);

// Accounting for the memory line and the benchmarks.
struct WeightStats {
  uint64_t bytes = 0;                  // every weight the forward pass uses (a tied output once)
  uint64_t bytes_per_token = 0;        // read by one decode step: all but the embedding table, of
                                       // which one row (the whole table when it is also the output),
                                       // and of the routed experts the expert_share a token uses
  uint64_t params = 0;                 // elements of every weight
  uint64_t matmul_params = 0;          // elements of the layer matrices a token multiplies (2 flops
                                       // each; routed experts: their expert_share)
  uint64_t output_params = 0;          // elements of the output projection
  GgmlType main_type = GgmlType::F32;  // the type holding most bytes of the layer matrices
};
WeightStats weight_stats(const ModelWeights& w);

}  // namespace llmctl
