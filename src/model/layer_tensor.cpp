// The per-layer tensor table and its shape, name and presence rules (layer_tensor.h).
#include "model/layer_tensor.h"

#include <fmt/format.h>

#include "core/error.h"
#include "model/config.h"
#include "model/weights.h"

namespace llmctl {

namespace {

using L = LayerWeights;
constexpr TensorKind M = TensorKind::Matrix;
constexpr TensorKind V = TensorKind::Vector;
constexpr TensorKind N = TensorKind::Norm;

}  // namespace

// GGUF names as llama.cpp's convert_hf_to_gguf.py writes them; HF names as transformers'
// modeling files. Shapes in ggml order [cols, rows].
const std::vector<LayerTensor> kLayerTensors = {
    {&L::attn_norm, "attn_norm.weight", "input_layernorm.weight", nullptr, N, Dim::NEmbd, Dim::One,
     When::PreNorm, false},
    {&L::wq, "attn_q.weight", "self_attn.q_proj.weight", nullptr, M, Dim::NEmbd, Dim::QDim,
     When::SplitQkv, true},
    {&L::wk, "attn_k.weight", "self_attn.k_proj.weight", nullptr, M, Dim::NEmbd, Dim::KvDim,
     When::SplitQkv, true},
    {&L::wv, "attn_v.weight", "self_attn.v_proj.weight", nullptr, M, Dim::NEmbd, Dim::KvDim,
     When::SplitQkv, false},
    {&L::wqkv, "attn_qkv.weight", "self_attn.qkv_proj.weight", nullptr, M, Dim::NEmbd, Dim::QkvDim,
     When::FusedQkv, false},
    {&L::wo, "attn_output.weight", "self_attn.o_proj.weight", nullptr, M, Dim::QDim, Dim::NEmbd,
     When::Always, false},
    {&L::bq, "attn_q.bias", "self_attn.q_proj.bias", nullptr, V, Dim::QDim, Dim::One, When::QkvBias,
     true},
    {&L::bk, "attn_k.bias", "self_attn.k_proj.bias", nullptr, V, Dim::KvDim, Dim::One,
     When::QkvBias, true},
    {&L::bv, "attn_v.bias", "self_attn.v_proj.bias", nullptr, V, Dim::KvDim, Dim::One,
     When::QkvBias, false},
    {&L::bo, "attn_output.bias", "self_attn.o_proj.bias", nullptr, V, Dim::NEmbd, Dim::One,
     When::OutBias, false},
    {&L::attn_sinks, "attn_sinks.weight", "self_attn.sinks", nullptr, V, Dim::NHeads, Dim::One,
     When::Sinks, false},
    {&L::attn_q_norm, "attn_q_norm.weight", "self_attn.q_norm.weight", nullptr, N, Dim::QNorm,
     Dim::One, When::QkNorm, true},
    {&L::attn_k_norm, "attn_k_norm.weight", "self_attn.k_norm.weight", nullptr, N, Dim::KNorm,
     Dim::One, When::QkNorm, true},
    {&L::attn_post_norm, "post_attention_norm.weight", "post_attention_layernorm.weight", nullptr,
     N, Dim::NEmbd, Dim::One, When::PostNorm, false},
    // Hugging Face names the pre-FFN norm after the attention block unless there is a real
    // post-attention norm (gemma2/3).
    {&L::ffn_norm, "ffn_norm.weight", "post_attention_layernorm.weight",
     "pre_feedforward_layernorm.weight", N, Dim::NEmbd, Dim::One, When::PreNorm, false,
     FfnPart::Any, Dim::One, "post_attention_norm.weight"},
    {&L::w_gate, "ffn_gate.weight", "mlp.gate_proj.weight", nullptr, M, Dim::NEmbd, Dim::NFf,
     When::SplitGateUp, false, FfnPart::Dense},
    {&L::w_up, "ffn_up.weight", "mlp.up_proj.weight", nullptr, M, Dim::NEmbd, Dim::NFf,
     When::SplitGateUp, false, FfnPart::Dense},
    {&L::w_gate_up, "ffn_up.weight", "mlp.gate_up_proj.weight", nullptr, M, Dim::NEmbd,
     Dim::GateUpDim, When::FusedGateUp, false, FfnPart::Dense},
    {&L::w_down, "ffn_down.weight", "mlp.down_proj.weight", nullptr, M, Dim::NFf, Dim::NEmbd,
     When::Always, false, FfnPart::Dense},
    // Mixture of experts: GGUF only (Hugging Face keeps one tensor per expert; the HF reader
    // refuses experts), so no HF names.
    {&L::ffn_gate_inp, "ffn_gate_inp.weight", "", nullptr, M, Dim::NEmbd, Dim::NExperts,
     When::Always, false, FfnPart::Routed},
    {&L::ffn_gate_exps, "ffn_gate_exps.weight", "", nullptr, M, Dim::NEmbd, Dim::NFfExpert,
     When::Always, false, FfnPart::Routed, Dim::NExperts},
    {&L::ffn_up_exps, "ffn_up_exps.weight", "", nullptr, M, Dim::NEmbd, Dim::NFfExpert,
     When::Always, false, FfnPart::Routed, Dim::NExperts},
    {&L::ffn_down_exps, "ffn_down_exps.weight", "", nullptr, M, Dim::NFfExpert, Dim::NEmbd,
     When::Always, false, FfnPart::Routed, Dim::NExperts},
    {&L::ffn_gate_inp_b, "ffn_gate_inp.bias", "", nullptr, V, Dim::NExperts, Dim::One,
     When::RouterBias, false, FfnPart::Routed},
    {&L::ffn_gate_exps_b, "ffn_gate_exps.bias", "", nullptr, V, Dim::NFfExpert, Dim::NExperts,
     When::ExpertBias, false, FfnPart::Routed},
    {&L::ffn_up_exps_b, "ffn_up_exps.bias", "", nullptr, V, Dim::NFfExpert, Dim::NExperts,
     When::ExpertBias, false, FfnPart::Routed},
    {&L::ffn_down_exps_b, "ffn_down_exps.bias", "", nullptr, V, Dim::NEmbd, Dim::NExperts,
     When::ExpertBias, false, FfnPart::Routed},
    {&L::ffn_gate_inp_shexp, "ffn_gate_inp_shexp.weight", "", nullptr, V, Dim::NEmbd, Dim::One,
     When::Always, false, FfnPart::Shared},
    {&L::ffn_gate_shexp, "ffn_gate_shexp.weight", "", nullptr, M, Dim::NEmbd, Dim::NFfShared,
     When::Always, false, FfnPart::Shared},
    {&L::ffn_up_shexp, "ffn_up_shexp.weight", "", nullptr, M, Dim::NEmbd, Dim::NFfShared,
     When::Always, false, FfnPart::Shared},
    {&L::ffn_down_shexp, "ffn_down_shexp.weight", "", nullptr, M, Dim::NFfShared, Dim::NEmbd,
     When::Always, false, FfnPart::Shared},
    {&L::ffn_post_norm, "post_ffw_norm.weight", "post_feedforward_layernorm.weight", nullptr, N,
     Dim::NEmbd, Dim::One, When::PostNorm, false},
};

namespace {

// Rows [row0, row0 + n_rows) of matrix m: whole rows are contiguous in any engine type.
WeightView row_slice(const WeightView& m, int64_t row0, int64_t n_rows) {
  LLMCTL_ASSERT(row0 >= 0 && row0 + n_rows <= m.n_rows);
  WeightView v = m;  // the fused tensor's name, for messages
  v.n_rows = n_rows;
  v.row0 = m.row0 + row0;
  v.data = static_cast<const uint8_t*>(m.data) +
           static_cast<size_t>(row0) * weight_row_bytes(m.type, m.n_cols);
  return v;
}

}  // namespace

LayerWeights split_fused_layer(const LayerWeights& l, const ModelConfig& c) {
  LayerWeights s = l;
  if (c.fused_qkv) {
    s.wq = row_slice(l.wqkv, 0, c.q_dim());
    s.wk = row_slice(l.wqkv, c.q_dim(), c.kv_dim());
    s.wv = row_slice(l.wqkv, c.q_dim() + c.kv_dim(), c.kv_dim());
    s.wqkv = WeightView{};
  }
  if (c.fused_gate_up) {
    s.w_gate = row_slice(l.w_gate_up, 0, c.n_ff);
    s.w_up = row_slice(l.w_gate_up, c.n_ff, c.n_ff);
    s.w_gate_up = WeightView{};
  }
  if (c.n_experts > 0) {
    s.experts.resize(static_cast<size_t>(c.n_experts));
    for (int64_t e = 0; e < c.n_experts; ++e) {
      LayerWeights::Expert& x = s.experts[static_cast<size_t>(e)];
      x.gate = row_slice(l.ffn_gate_exps, e * c.n_ff_expert, c.n_ff_expert);
      x.up = row_slice(l.ffn_up_exps, e * c.n_ff_expert, c.n_ff_expert);
      x.down = row_slice(l.ffn_down_exps, e * c.n_embd, c.n_embd);
      if (c.moe_expert_biases) {  // row e of each (cols, n_experts) bias: a (cols,) vector
        x.gate_b = row_slice(l.ffn_gate_exps_b, e, 1);
        x.up_b = row_slice(l.ffn_up_exps_b, e, 1);
        x.down_b = row_slice(l.ffn_down_exps_b, e, 1);
      }
    }
    s.ffn_gate_exps = s.ffn_up_exps = s.ffn_down_exps = WeightView{};
    s.ffn_gate_exps_b = s.ffn_up_exps_b = s.ffn_down_exps_b = WeightView{};
  }
  return s;
}

int64_t dim_size(Dim d, const ModelConfig& c) {
  switch (d) {
    case Dim::One:
      return 1;
    case Dim::NEmbd:
      return c.n_embd;
    case Dim::HeadDim:
      return c.head_dim;
    case Dim::NHeads:
      return c.n_heads;
    case Dim::QDim:
      return c.q_dim();
    case Dim::KvDim:
      return c.kv_dim();
    case Dim::QNorm:
      return c.qk_norm == QkNorm::WholeVector ? c.q_dim() : c.head_dim;
    case Dim::KNorm:
      return c.qk_norm == QkNorm::WholeVector ? c.kv_dim() : c.head_dim;
    case Dim::QkvDim:
      return c.q_dim() + 2 * c.kv_dim();
    case Dim::NFf:
      return c.n_ff;
    case Dim::GateUpDim:
      return 2 * c.n_ff;
    case Dim::NExperts:
      return c.n_experts;
    case Dim::NFfExpert:
      return c.n_ff_expert;
    case Dim::NFfShared:
      return c.n_ff_shared;
  }
  LLMCTL_ASSERT(false);
  return 0;
}

namespace {

bool ffn_part_present(FfnPart p, const ModelConfig& c) {
  switch (p) {
    case FfnPart::Any:
      return true;
    case FfnPart::Dense:
      return c.n_experts == 0;
    case FfnPart::Routed:
      return c.n_experts > 0;
    case FfnPart::Shared:
      return c.n_experts > 0 && c.moe_gated_shared_expert;
  }
  LLMCTL_ASSERT(false);
  return false;
}

}  // namespace

bool layer_tensor_present(const LayerTensor& t, const ModelConfig& c) {
  if (!ffn_part_present(t.ffn, c)) return false;
  switch (t.when) {
    case When::Always:
      return true;
    case When::PreNorm:
      return c.norms != NormPlacement::Post;
    case When::PostNorm:
      return c.norms != NormPlacement::Pre;
    case When::SplitQkv:
      return !c.fused_qkv;
    case When::FusedQkv:
      return c.fused_qkv;
    case When::QkvBias:
      return c.has_qkv_bias && !c.fused_qkv;
    case When::QkNorm:
      return c.qk_norm != QkNorm::None;
    case When::SplitGateUp:
      return !c.fused_gate_up;
    case When::FusedGateUp:
      return c.fused_gate_up;
    case When::OutBias:
      return c.has_out_bias;
    case When::Sinks:
      return c.has_attn_sinks;
    case When::RouterBias:
      return c.moe_router_bias;
    case When::ExpertBias:
      return c.moe_expert_biases;
  }
  LLMCTL_ASSERT(false);
  return false;
}

std::string gguf_tensor_name(const LayerTensor& t, int64_t layer, const ModelConfig& c) {
  const bool post = t.gguf_if_named_post_attention != nullptr && c.ffn_norm_named_post_attention;
  return fmt::format("blk.{}.{}", layer, post ? t.gguf_if_named_post_attention : t.gguf);
}

std::string hf_tensor_name(const LayerTensor& t, int64_t layer, const ModelConfig& c) {
  const bool both = t.hf_if_both_norms != nullptr && c.norms == NormPlacement::Both;
  return fmt::format("model.layers.{}.{}", layer, both ? t.hf_if_both_norms : t.hf);
}

std::vector<int64_t> layer_tensor_shape(const LayerTensor& t, const ModelConfig& c) {
  if (t.rows == Dim::One) return {dim_size(t.cols, c)};
  if (t.experts != Dim::One)
    return {dim_size(t.cols, c), dim_size(t.rows, c), dim_size(t.experts, c)};
  return {dim_size(t.cols, c), dim_size(t.rows, c)};
}

}  // namespace llmctl
