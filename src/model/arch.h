#pragma once
// The architecture table: what each model family is, as data, in one place.
//
//   kArchRows        one row per architecture: its GGUF name, its Hugging Face classes and the
//                    switches the forward pass reads (RoPE pairing, biases, QK-norm, norm
//                    placement, activation, scales, soft-caps, sliding-window pattern, fused
//                    tensors, tied output, the Q/K permutation when converting from HF,
//                    mixture of experts, attention temperature); the fields in arch_row.h.
//   kLayerTensors    every per-layer tensor any row may have: the LayerWeights member, the GGUF
//                    and HF names, the shape rule, and the switch that makes it present
//                    (model/layer_tensor.h, included here).
//
// Readers (config.cpp, hf_config.cpp) find the row and copy its switches into ModelConfig
// (apply_arch_row); binders (weights.cpp, hf_weights.cpp, Forward's bind_to_backend), the
// weight statistics and the HF-to-GGUF writer iterate kLayerTensors; the forward pass reads
// ModelConfig's switches, never an architecture name. An architecture that needs no new math
// is one row (and its tests). A row, or a file, asking for math the forward pass does not
// compute yet is refused by require_implemented() with a message naming what is missing.
//
// Partial rotary (Phi-4-mini, ...) is not a row switch: n_rot < head_dim comes from each file
// ({arch}.rope.dimension_count, config.json partial_rotary_factor) and RoPE leaves the rest of
// each head as it is, for every row.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/rope_math.h"
#include "core/sliding_window.h"  // WindowLayers, WindowPattern
#include "model/arch_row.h"       // ArchRow and its switches
#include "model/layer_tensor.h"   // kLayerTensors, the per-layer tensor table

namespace llmctl {

struct ModelConfig;
struct LayerWeights;

// The rows. Hugging Face rotates "halves" (NEOX pairing) in every family, so HF models run
// with RopeType::Neox whatever gguf_rope says (hf_config.h).
inline constexpr ArchRow kArchRows[] = {
    // llama: Llama 1-3, Mistral (llama.cpp converts it as llama too), TinyLlama, SmolLM2.
    {"llama",
     {"LlamaForCausalLM", "MistralForCausalLM", nullptr, nullptr},
     RopeType::Normal,
     /*hf_qk_permute=*/true,
     /*qkv_bias=*/false,
     QkNorm::None,
     NormPlacement::Pre,
     Activation::SwiGlu,
     EmbedScale::None,
     /*file_scales=*/false,
     /*attn_softcap=*/0.0,
     /*final_softcap=*/0.0,
     WindowPattern{},
     /*fused_qkv=*/false,
     /*fused_gate_up=*/false,
     /*hf_tied_default=*/false,
     /*hf_bias_keys=*/true,
     HfWindowKey::UniformClampsContext,
     /*embd_per_head_scale_layers=*/0,
     /*hf_norm_offset=*/false,
     /*hf_query_pre_attn_scalar=*/false,
     // Mixtral (llama.cpp's llama.cpp model: expert size feed_forward_length, norm_w true)
     MoeRow{MoeExperts::Optional, /*renormalize=*/true, /*gated_shared_expert=*/false,
            /*expert_ff_key=*/false}},
    // qwen2: Qwen2, Qwen2.5, DeepSeek-R1-Distill-Qwen.
    {"qwen2",
     {"Qwen2ForCausalLM", nullptr, nullptr, nullptr},
     RopeType::Neox,
     /*hf_qk_permute=*/false,
     /*qkv_bias=*/true,
     QkNorm::None,
     NormPlacement::Pre,
     Activation::SwiGlu,
     EmbedScale::None,
     /*file_scales=*/false,
     /*attn_softcap=*/0.0,
     /*final_softcap=*/0.0,
     WindowPattern{},
     /*fused_qkv=*/false,
     /*fused_gate_up=*/false,
     /*hf_tied_default=*/false,
     /*hf_bias_keys=*/false,
     HfWindowKey::GatedRefused},
    // qwen3: Qwen3 dense models (llama.cpp's LLM_ARCH_QWEN3, src/models/qwen3.cpp): qwen2 without
    // biases, plus an RMSNorm of each head of q and k before RoPE; head_dim is explicit
    // (attention.key_length, config.json head_dim: 128 with n_embd / n_heads = 64 in the 0.6B).
    {"qwen3",
     {"Qwen3ForCausalLM", nullptr, nullptr, nullptr},
     RopeType::Neox,
     /*hf_qk_permute=*/false,
     /*qkv_bias=*/false,
     QkNorm::PerHead,
     NormPlacement::Pre,
     Activation::SwiGlu,
     EmbedScale::None,
     /*file_scales=*/false,
     /*attn_softcap=*/0.0,
     /*final_softcap=*/0.0,
     WindowPattern{},
     /*fused_qkv=*/false,
     /*fused_gate_up=*/false,
     /*hf_tied_default=*/false,
     /*hf_bias_keys=*/true,
     HfWindowKey::GatedRefused},
    // qwen2moe: Qwen1.5-MoE, Qwen2-57B-A14B (llama.cpp's LLM_ARCH_QWEN2MOE, src/models/
    // qwen2moe.cpp): qwen2 attention (q/k/v biases), every FFN routed, the k weights not
    // renormalised (norm_w false), plus a shared expert gated by sigmoid(ffn_gate_inp_shexp . x).
    // GGUF only.
    {"qwen2moe",
     {nullptr, nullptr, nullptr, nullptr},
     RopeType::Neox,
     /*hf_qk_permute=*/false,
     /*qkv_bias=*/true,
     QkNorm::None,
     NormPlacement::Pre,
     Activation::SwiGlu,
     EmbedScale::None,
     /*file_scales=*/false,
     /*attn_softcap=*/0.0,
     /*final_softcap=*/0.0,
     WindowPattern{},
     /*fused_qkv=*/false,
     /*fused_gate_up=*/false,
     /*hf_tied_default=*/false,
     /*hf_bias_keys=*/false,
     HfWindowKey::None,
     /*embd_per_head_scale_layers=*/0,
     /*hf_norm_offset=*/false,
     /*hf_query_pre_attn_scalar=*/false,
     MoeRow{MoeExperts::Required, /*renormalize=*/false, /*gated_shared_expert=*/true,
            /*expert_ff_key=*/true}},
    // qwen3moe: Qwen3-30B-A3B, Qwen3-235B-A22B (llama.cpp's LLM_ARCH_QWEN3MOE, src/models/
    // qwen3moe.cpp): qwen3 attention (QK-norm per head, no biases), every FFN routed (top-8 of
    // 128 in the real models), the k weights renormalised (norm_w true). GGUF only.
    {"qwen3moe",
     {nullptr, nullptr, nullptr, nullptr},
     RopeType::Neox,
     /*hf_qk_permute=*/false,
     /*qkv_bias=*/false,
     QkNorm::PerHead,
     NormPlacement::Pre,
     Activation::SwiGlu,
     EmbedScale::None,
     /*file_scales=*/false,
     /*attn_softcap=*/0.0,
     /*final_softcap=*/0.0,
     WindowPattern{},
     /*fused_qkv=*/false,
     /*fused_gate_up=*/false,
     /*hf_tied_default=*/false,
     /*hf_bias_keys=*/false,
     HfWindowKey::None,
     /*embd_per_head_scale_layers=*/0,
     /*hf_norm_offset=*/false,
     /*hf_query_pre_attn_scalar=*/false,
     MoeRow{MoeExperts::Required, /*renormalize=*/true, /*gated_shared_expert=*/false,
            /*expert_ff_key=*/true}},
    // olmo2: OLMo 2 (llama.cpp's LLM_ARCH_OLMO2, src/models/olmo2.cpp): no norm before attention
    // or FFN, an RMSNorm of each block's output before the residual add, and an RMSNorm over
    // all of q and all of k (weights (q_dim,), (kv_dim,)) before RoPE. OLMo 2 files have no
    // sliding window; one with olmo2.attention.sliding_window (OLMo 3, converted as olmo2)
    // windows 3 of every 4 layers as llama.cpp does (its per-layer list form is refused).
    {"olmo2",
     {"Olmo2ForCausalLM", nullptr, nullptr, nullptr},
     RopeType::Neox,
     /*hf_qk_permute=*/false,
     /*qkv_bias=*/false,
     QkNorm::WholeVector,
     NormPlacement::Post,
     Activation::SwiGlu,
     EmbedScale::None,
     /*file_scales=*/false,
     /*attn_softcap=*/0.0,
     /*final_softcap=*/0.0,
     WindowPattern{WindowLayers::AllButEveryPeriod, 4, 0.0, 0},
     /*fused_qkv=*/false,
     /*fused_gate_up=*/false,
     /*hf_tied_default=*/false,
     /*hf_bias_keys=*/true,
     HfWindowKey::None},
    // gemma2: Gemma 2 (llama.cpp's LLM_ARCH_GEMMA2, src/models/gemma2.cpp): embeddings times
    // sqrt(n_embd), norms before and after attention and FFN (GGUF norm weights hold 1 + w),
    // the tanh-GELU GLU, attention scores soft-capped at gemma2.attn_logit_softcapping
    // (default 50) and logits at final_logit_softcapping (default 30), a sliding window of
    // gemma2.attention.sliding_window (default 4096) on even layers (0, 2, ...), global odd
    // layers, one RoPE base. Attention scale 1/sqrt(head_dim), except 1/sqrt(n_embd / n_heads)
    // for the 46-layer 27B (llama.cpp's rule; Hugging Face: query_pre_attn_scalar).
    {"gemma2",
     {"Gemma2ForCausalLM", nullptr, nullptr, nullptr},
     RopeType::Neox,
     /*hf_qk_permute=*/false,
     /*qkv_bias=*/false,
     QkNorm::None,
     NormPlacement::Both,
     Activation::GeluTanhGlu,
     EmbedScale::SqrtNEmbd,
     /*file_scales=*/false,
     /*attn_softcap=*/50.0,
     /*final_softcap=*/30.0,
     WindowPattern{WindowLayers::AllButEveryPeriod, 2, 0.0, 4096},
     /*fused_qkv=*/false,
     /*fused_gate_up=*/false,
     /*hf_tied_default=*/true,
     /*hf_bias_keys=*/true,
     HfWindowKey::PatternLength,
     /*embd_per_head_scale_layers=*/46,
     /*hf_norm_offset=*/true,
     /*hf_query_pre_attn_scalar=*/true},
    // gemma3: Gemma 3 text models (llama.cpp's LLM_ARCH_GEMMA3, src/models/gemma3.cpp). Norm
    // weights in its GGUF files already hold Gemma's 1 + w (convert_hf_to_gguf norm_shift).
    // 5 of 6 layers attend through gemma3.attention.sliding_window with RoPE base 10000
    // (llama.cpp's rope_freq_base_train_swa default; the file's rope.freq_base_swa overrides),
    // every 6th is global with the file's rope.freq_base (and rope scaling); without the
    // sliding_window key every layer is global, as in llama.cpp. Attention scale
    // 1/sqrt(head_dim), except 1/sqrt(n_embd / n_head) for the 62-layer 27B (llama.cpp's
    // f_attention_scale). Hugging Face (Gemma3ForCausalLM, transformers' Gemma3TextConfig):
    // norm and QK-norm weights hold w for a scale of 1 + w, the attention scale is
    // query_pre_attn_scalar's, layer_types or sliding_window_pattern give the pattern, the
    // local base is rope_local_base_freq (v4) or rope_parameters.sliding_attention.rope_theta
    // (v5), the global one and its scaling rope_theta / rope_scaling (v4) or
    // rope_parameters.full_attention (v5), default base 1e6.
    {"gemma3",
     {"Gemma3ForCausalLM", nullptr, nullptr, nullptr},
     RopeType::Neox,
     /*hf_qk_permute=*/false,
     /*qkv_bias=*/false,
     QkNorm::PerHead,
     NormPlacement::Both,
     Activation::GeluTanhGlu,
     EmbedScale::SqrtNEmbd,
     /*file_scales=*/false,
     /*attn_softcap=*/0.0,
     /*final_softcap=*/0.0,
     WindowPattern{WindowLayers::AllButEveryPeriod, 6, 10000.0},
     /*fused_qkv=*/false,
     /*fused_gate_up=*/false,
     /*hf_tied_default=*/true,
     /*hf_bias_keys=*/true,
     HfWindowKey::PatternPeriod,
     /*embd_per_head_scale_layers=*/62,
     /*hf_norm_offset=*/true,
     /*hf_query_pre_attn_scalar=*/true,
     MoeRow{},
     /*attn_temperature=*/false,
     /*hf_rope_theta=*/1000000.0},
    // mistral3: Mistral 3 and Ministral 3 text models (llama.cpp's LLM_ARCH_MISTRAL3,
    // src/models/mistral3.cpp; transformers' Ministral3ForCausalLM): llama with YaRN (the
    // readers' rope scaling) and Llama 4's attention temperature, q times 1 + beta
    // ln(1 + floor(pos / original context)) after RoPE (beta 0.1, original context 16384 in
    // the released models, so the factor is exactly 1 below 16384 positions). Converted like
    // llama (Q/K rows permuted for adjacent pairing).
    {"mistral3",
     {"Ministral3ForCausalLM", nullptr, nullptr, nullptr},
     RopeType::Normal,
     /*hf_qk_permute=*/true,
     /*qkv_bias=*/false,
     QkNorm::None,
     NormPlacement::Pre,
     Activation::SwiGlu,
     EmbedScale::None,
     /*file_scales=*/false,
     /*attn_softcap=*/0.0,
     /*final_softcap=*/0.0,
     WindowPattern{},
     /*fused_qkv=*/false,
     /*fused_gate_up=*/false,
     /*hf_tied_default=*/false,
     /*hf_bias_keys=*/true,
     HfWindowKey::UniformClampsContext,
     /*embd_per_head_scale_layers=*/0,
     /*hf_norm_offset=*/false,
     /*hf_query_pre_attn_scalar=*/false,
     MoeRow{},
     /*attn_temperature=*/true},
    // granite: IBM Granite 3.x dense models (llama.cpp's LLM_ARCH_GRANITE, src/models/
    // granite.cpp): llama with four scales from the file: embeddings times embedding_scale,
    // each block's output times residual_scale before the residual add, attention scores
    // times attention.scale, logits divided by logit_scale (config.json embedding_multiplier,
    // residual_multiplier, attention_multiplier, logits_scaling). Converted like llama (Q/K
    // rows permuted for adjacent pairing).
    {"granite",
     {"GraniteForCausalLM", nullptr, nullptr, nullptr},
     RopeType::Normal,
     /*hf_qk_permute=*/true,
     /*qkv_bias=*/false,
     QkNorm::None,
     NormPlacement::Pre,
     Activation::SwiGlu,
     EmbedScale::None,
     /*file_scales=*/true,
     /*attn_softcap=*/0.0,
     /*final_softcap=*/0.0,
     WindowPattern{},
     /*fused_qkv=*/false,
     /*fused_gate_up=*/false,
     /*hf_tied_default=*/false,
     /*hf_bias_keys=*/true,
     HfWindowKey::None},
    // phi3: Phi-3 and Phi-4-mini (llama.cpp's LLM_ARCH_PHI3, src/models/phi3.cpp): llama with
    // one fused QKV projection (blk.N.attn_qkv, rows q then k then v) and one fused gate/up
    // projection (blk.N.ffn_up, 2 n_ff rows, gate first), NEOX pairing, partial rotary from
    // rope.dimension_count (Phi-4-mini). llama.cpp ignores phi3.attention.sliding_window
    // (phi3.cpp: "Phi SWA is currently disabled"), so a GGUF attends globally; transformers
    // masks config.json sliding_window, which matches full attention up to that many
    // positions, so it caps the context (UniformClampsContext).
    {"phi3",
     {"Phi3ForCausalLM", nullptr, nullptr, nullptr},
     RopeType::Neox,
     /*hf_qk_permute=*/false,
     /*qkv_bias=*/false,
     QkNorm::None,
     NormPlacement::Pre,
     Activation::SwiGlu,
     EmbedScale::None,
     /*file_scales=*/false,
     /*attn_softcap=*/0.0,
     /*final_softcap=*/0.0,
     WindowPattern{},
     /*fused_qkv=*/true,
     /*fused_gate_up=*/true,
     /*hf_tied_default=*/false,
     /*hf_bias_keys=*/true,
     HfWindowKey::UniformClampsContext},
    // gpt-oss: OpenAI's gpt-oss-20b and -120b (llama.cpp's LLM_ARCH_OPENAI_MOE,
    // src/models/openai-moe.cpp): q/k/v and output-projection biases, one attention-sink
    // logit per head in every softmax, a sliding window of gpt-oss.attention.sliding_window
    // (required) on even layers (llama.cpp's set_swa_pattern(2)) with the global RoPE base
    // and scaling on every layer (rope_freq_base_train_swa = rope_freq_base_train), YaRN from
    // the file, NEOX pairing, scale 1/sqrt(head_dim); every FFN routed: the router with a
    // bias, top-k by logit then a softmax over the k (SOFTMAX_WEIGHT), experts with biases
    // and the swiglu_oai activation. The pre-FFN norm is post_attention_norm.weight. GGUF only.
    {"gpt-oss",
     {nullptr, nullptr, nullptr, nullptr},
     RopeType::Neox,
     /*hf_qk_permute=*/false,
     /*qkv_bias=*/true,
     QkNorm::None,
     NormPlacement::Pre,
     Activation::SwiGluOai,
     EmbedScale::None,
     /*file_scales=*/false,
     /*attn_softcap=*/0.0,
     /*final_softcap=*/0.0,
     WindowPattern{WindowLayers::AllButEveryPeriod, 2, 0.0, 0, /*length_required=*/true},
     /*fused_qkv=*/false,
     /*fused_gate_up=*/false,
     /*hf_tied_default=*/false,
     /*hf_bias_keys=*/false,
     HfWindowKey::None,
     /*embd_per_head_scale_layers=*/0,
     /*hf_norm_offset=*/false,
     /*hf_query_pre_attn_scalar=*/false,
     MoeRow{MoeExperts::Required, /*renormalize=*/false, /*gated_shared_expert=*/false,
            /*expert_ff_key=*/true, MoeGating::SoftmaxWeight, /*router_bias=*/true,
            /*expert_biases=*/true},
     /*attn_temperature=*/false,
     /*hf_rope_theta=*/10000.0,
     /*attn_out_bias=*/true,
     /*attn_sinks=*/true,
     /*ffn_norm_named_post_attention=*/true},
};

// A list of rows to search (the tests pass their own).
struct ArchTable {
  const ArchRow* rows = kArchRows;
  size_t n_rows = sizeof(kArchRows) / sizeof(kArchRows[0]);
  const ArchRow* begin() const { return rows; }
  const ArchRow* end() const { return rows + n_rows; }
};

// The row named `gguf_name`, or nullptr.
const ArchRow* find_arch_by_gguf(const std::string& gguf_name, const ArchTable& table = {});
// The window pattern of the row named `gguf_name`, or nullopt (kvplan's, cli/kvplan_model.h).
std::optional<WindowPattern> arch_window_pattern(const std::string& gguf_name);
// The row listing Hugging Face class `hf_class`, or nullptr.
const ArchRow* find_arch_by_hf(const std::string& hf_class, const ArchTable& table = {});
// "llama, qwen2" and "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM", for messages.
std::string arch_gguf_names(const ArchTable& table = {});
std::string arch_hf_classes(const ArchTable& table = {});

// Copies the row's switches into `c` (arch name, biases, QK-norm, norms, activation, scales,
// soft-caps, window, fused tensors). rope_type is left to the reader: the row's gguf_rope for
// a GGUF file, Neox for a HF directory. Dimensions must be set first (embd_scale reads n_embd).
void apply_arch_row(const ArchRow& row, ModelConfig& c);

// What `c` asks for that the forward pass does not compute yet, one phrase each ("a fused QKV
// projection", ...); empty when it runs as is.
std::vector<std::string> unimplemented_math(const ModelConfig& c);
// "architecture 'X' needs A and B, which llmctl's forward pass does not implement yet", or ""
// when nothing is missing (for a reader to wrap in a FileError).
std::string unimplemented_message(const ModelConfig& c);
// Throws Error with that message when something is missing (the forward pass calls it).
void require_implemented(const ModelConfig& c);

// ---- per-layer attention options --------------------------------------------------------

// Whether layer il attends through the sliding window (c.window.layers; c.sliding_window > 0).
bool layer_windowed(const ModelConfig& c, int64_t il);
// Layer il's window in positions (AttentionShape::window): c.sliding_window when windowed, else 0.
int32_t layer_window(const ModelConfig& c, int64_t il);
// layer_window of every layer, in order (the KV cache's layer groups, kv_cache.h).
std::vector<int32_t> layer_windows(const ModelConfig& c);
// Layer il's RoPE base and linear frequency scale: a windowed layer of a pattern with a local
// base (layer_rope_local) gets that base and no scaling (llama.cpp's
// rope_freq_{base,scale}_train_swa), neither linear nor YaRN; every other layer the file's.
bool layer_rope_local(const ModelConfig& c, int64_t il);
double layer_rope_base(const ModelConfig& c, int64_t il);
double layer_rope_freq_scale(const ModelConfig& c, int64_t il);

}  // namespace llmctl
