#pragma once
// The per-layer tensor table: every per-layer tensor any architecture row (arch.h) may have,
// with its LayerWeights member, GGUF and HF names, shape rule and the switch that makes it
// present. Binders (weights.cpp, hf_weights.cpp, Forward's bind_to_backend), the weight
// statistics and the HF-to-GGUF writer iterate kLayerTensors.

#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"  // WeightView

namespace llmctl {

struct ModelConfig;
struct LayerWeights;

// A dimension of a tensor, in terms of the config.
// QNorm / KNorm: head_dim for QK-norm per head, q_dim / kv_dim for QK-norm over the whole vector.
// NFfExpert: an expert's FFN size; NFfShared: the shared expert's; NExperts: expert_count.
enum class Dim : uint8_t {
  One,
  NEmbd,
  HeadDim,
  NHeads,
  QDim,
  KvDim,
  QNorm,
  KNorm,
  QkvDim,
  NFf,
  GateUpDim,
  NExperts,
  NFfExpert,
  NFfShared,
};
int64_t dim_size(Dim d, const ModelConfig& c);

// The switch that makes a tensor present.
enum class When : uint8_t {
  Always,
  PreNorm,      // norms Pre or Both
  PostNorm,     // norms Post or Both
  SplitQkv,     // !fused_qkv
  FusedQkv,     // fused_qkv
  QkvBias,      // has_qkv_bias (and split q/k/v)
  QkNorm,       // qk_norm PerHead or WholeVector
  SplitGateUp,  // !fused_gate_up
  FusedGateUp,  // fused_gate_up
  OutBias,      // has_out_bias
  Sinks,        // has_attn_sinks
  RouterBias,   // moe_router_bias (and routed)
  ExpertBias,   // moe_expert_biases (and routed)
};

// Which feed-forward network a tensor belongs to: a layer has the dense one, or (a model with
// experts) the router and the routed experts, and the shared expert when the row has one.
enum class FfnPart : uint8_t {
  Any,     // not an FFN tensor, or in every layer
  Dense,   // n_experts == 0
  Routed,  // n_experts > 0
  Shared,  // n_experts > 0 and gated_shared_expert
};

enum class TensorKind : uint8_t {
  Matrix,  // any supported weight type (backend_supports_weight_type)
  Vector,  // F32 for the engine (HF loader widens F16/BF16 copies)
  Norm,    // an RMSNorm weight: a Vector, which the HF loader adds 1 to for rows with
           // hf_norm_offset (their files hold w for a scale of 1 + w)
};

struct LayerTensor {
  WeightView LayerWeights::*member;
  const char* gguf;              // after "blk.N.", e.g. "attn_q.weight"
  const char* hf;                // after "model.layers.N.", e.g. "self_attn.q_proj.weight"
  const char* hf_if_both_norms;  // the HF name when norms are Both (nullptr: hf)
  TensorKind kind;
  Dim cols, rows;  // ggml order [cols, rows] (cols = row length); a vector is [cols], rows One
  When when;
  // Its rows (a vector's elements) are per-head rotated dims of q or k: permuted within each
  // head when a row with hf_qk_permute is converted from HF (hf_to_gguf.h).
  bool rotary_rows;
  FfnPart ffn = FfnPart::Any;  // present only where the layer has that FFN (and `when` holds)
  // A third ggml dimension (NExperts): one [cols, rows] matrix per expert, stored one after
  // another; the WeightView holds all of them as n_experts * rows rows (split_fused_layer
  // gives each expert's rows as a view). One: a matrix or vector.
  Dim experts = Dim::One;
  // The GGUF name (after "blk.N.") in files of a row with ffn_norm_named_post_attention
  // (nullptr: gguf).
  const char* gguf_if_named_post_attention = nullptr;
};

// Tensors the forward pass may read, in binding order; each LayerWeights member once.
extern const std::vector<LayerTensor> kLayerTensors;

bool layer_tensor_present(const LayerTensor& t, const ModelConfig& c);
// "blk.3.attn_q.weight", "model.layers.3.self_attn.q_proj.weight".
std::string gguf_tensor_name(const LayerTensor& t, int64_t layer, const ModelConfig& c);
std::string hf_tensor_name(const LayerTensor& t, int64_t layer, const ModelConfig& c);
// The layer as the forward pass reads it: a fused QKV matrix as wq, wk and wv, a fused gate/up
// as w_gate and w_up, views of consecutive rows of the fused tensor (rows q, k, v; gate, up, as
// llama.cpp's build_qkv and LLM_FFN_SWIGLU split them), the fused members absent; the 3-D
// expert tensors as one view per expert (LayerWeights::experts), their members absent. No
// copies: a backend's bind_weight of each view uploads or repacks those rows alone.
LayerWeights split_fused_layer(const LayerWeights& l, const ModelConfig& c);
// ggml-order shape {cols, rows}, {cols} for a vector, {cols, rows, n_experts} for experts.
std::vector<int64_t> layer_tensor_shape(const LayerTensor& t, const ModelConfig& c);

}  // namespace llmctl
