#pragma once
// What a row of the architecture table holds (model/arch.h kArchRows): the switches the
// readers copy into ModelConfig and the forward pass reads. The rows themselves, and the
// per-layer tensor table, are in arch.h.

#include <array>
#include <cstdint>

#include "core/moe_gating.h"      // MoeGating
#include "core/rope_math.h"       // RopeType
#include "core/sliding_window.h"  // WindowPattern

namespace llmctl {

enum class QkNorm : uint8_t {
  None,
  PerHead,      // rmsnorm of each head of q and k, weights (head_dim,)      (qwen3, gemma3)
  WholeVector,  // rmsnorm of all of q and all of k, weights (q_dim,), (kv_dim,)   (olmo2)
};

enum class NormPlacement : uint8_t {
  Pre,   // x += f(norm(x))                           (llama, qwen2)
  Post,  // x += norm(f(x))                           (olmo2)
  Both,  // x += post_norm(f(pre_norm(x)))            (gemma2, gemma3)
};

enum class Activation : uint8_t {
  SwiGlu,       // silu(gate) * up                    config.json hidden_act "silu"
  GeluTanhGlu,  // gelu_tanh(gate) * up               "gelu_pytorch_tanh" (gemma)
  SwiGluOai,    // swiglu_oai(gate, up): clamped, alpha 1.702, (up + 1)   (gpt-oss experts;
                // core/activation_math.h)
};

enum class EmbedScale : uint8_t {
  None,
  SqrtNEmbd,  // x = token_embd[t] * sqrt(n_embd)   (gemma)
};

// What a config.json key about a sliding window means for the architecture today.
enum class HfWindowKey : uint8_t {
  None,                  // no such key is read
  UniformClampsContext,  // `sliding_window` N on every layer (Mistral): identical to full
                         // attention up to N positions, so N caps the training context
  GatedRefused,          // `use_sliding_window` true (Qwen2) is refused
  PatternLength,         // `sliding_window` N is the length of the row's window pattern;
                         // `layer_types`, when present, must list that pattern (Gemma 2)
  PatternPeriod,         // PatternLength, and `sliding_window_pattern` P (transformers v4,
                         // default the row's) its period; `sliding_window` required (Gemma 3)
};

// Mixture of experts (llama.cpp's build_moe_ffn, src/llama-graph.cpp): a router ffn_gate_inp
// gives each token softmax probabilities over {arch}.expert_count experts; its
// expert_used_count best run (SwiGLU FFNs, ffn_{gate,up,down}_exps) and their outputs are
// added, weighted by those probabilities.
enum class MoeExperts : uint8_t {
  None,      // dense only: a file with expert_count > 0 is refused
  Optional,  // dense, or every layer routed when expert_count > 0 (llama: Mixtral)
  Required,  // every layer routed; expert_count and expert_used_count required (qwen*moe)
};

struct MoeRow {
  MoeExperts experts = MoeExperts::None;
  // The k chosen probabilities divided by their sum (llama.cpp's norm_w) before weighting.
  bool renormalize = false;
  // One more SwiGLU FFN every token runs (ffn_{gate,up,down}_shexp), its output scaled by
  // sigmoid(ffn_gate_inp_shexp . x) and added (qwen2moe). Its size:
  // {arch}.expert_shared_feed_forward_length, else feed_forward_length.
  bool gated_shared_expert = false;
  // Expert FFN size: {arch}.expert_feed_forward_length, else feed_forward_length /
  // expert_used_count (true: qwen2moe, qwen3moe); false: feed_forward_length, the key unread
  // (llama).
  bool expert_ff_key = false;
  // How the router's logits become the k weights (core/moe_gating.h).
  MoeGating gating = MoeGating::Softmax;
  // The router has a bias, ffn_gate_inp.bias (n_experts,), added to its logits (gpt-oss).
  bool router_bias = false;
  // Each expert's gate, up and down projections have biases, ffn_{gate,up,down}_exps.bias
  // ((n_ff_expert, n_experts), (n_ff_expert, n_experts), (n_embd, n_experts); gpt-oss).
  bool expert_biases = false;
};

struct ArchRow {
  const char* gguf_name;                  // general.architecture, and the "{arch}." key prefix
  std::array<const char*, 4> hf_classes;  // config.json architectures[0] (nullptr: unused)
  RopeType gguf_rope;                     // RoPE pairing of Q/K rows in its GGUF files
  bool hf_qk_permute;  // HF -> GGUF permutes Q/K rows (rotate_half halves -> adjacent pairs)
  bool qkv_bias;       // q/k/v projections have biases (none on the output projection)
  QkNorm qk_norm;
  NormPlacement norms;
  Activation activation;
  EmbedScale embd_scale;
  bool file_scales;      // embedding/residual/attention/logit scales from the file (granite):
                         // the readers fill embd_scale, residual_scale, attn_scale, logit_scale
  double attn_softcap;   // tanh cap of attention scores, 0: none; a file's value overrides
                         // (GGUF {arch}.attn_logit_softcapping, config.json attn_logit_softcapping)
  double final_softcap;  // tanh cap of the logits, 0: none; a file's value overrides (any row)
  WindowPattern window;
  bool fused_qkv;        // one (n_embd, q_dim + 2 kv_dim) projection (phi3)
  bool fused_gate_up;    // one (n_embd, 2 n_ff) projection, gate first (phi3)
  bool hf_tied_default;  // config.json tie_word_embeddings when absent
  bool hf_bias_keys;     // config.json attention_bias / mlp_bias apply (true: refused)
  HfWindowKey hf_window;
  // llama.cpp's Gemma 2 and 3 27B rule (GGUF has no key for it): a file with exactly this many
  // layers scales attention scores by 1/sqrt(n_embd / n_heads), not 1/sqrt(head_dim). 0: never.
  int64_t embd_per_head_scale_layers = 0;
  // Hugging Face norm weights w scale by (1 + w) (Gemma's RMSNorm); GGUF files hold 1 + w
  // (convert_hf_to_gguf adds the 1), so the HF loader adds it too.
  bool hf_norm_offset = false;
  // config.json `query_pre_attn_scalar` Q sets the attention scale 1/sqrt(Q) (Gemma).
  bool hf_query_pre_attn_scalar = false;
  MoeRow moe = {};
  // The file may set an attention temperature (ModelConfig::attn_temp_beta): q times
  // 1 + beta ln(1 + floor(pos / L)) after RoPE, L the original context. GGUF: beta
  // {arch}.attention.temperature_scale (absent or 0: none), L rope.scaling.original_context_length
  // (default context_length), as llama.cpp's mistral3 reads them; config.json: rope_parameters'
  // llama_4_scaling_beta and original_max_position_embeddings (Ministral 3, both required).
  bool attn_temperature = false;
  // config.json's RoPE base when it gives none (transformers' class default).
  double hf_rope_theta = 10000.0;
  // The attention output projection has a bias, attn_output.bias (n_embd,) (gpt-oss).
  bool attn_out_bias = false;
  // Attention sinks: one logit per head, attn_sinks.weight (n_heads,), that joins each
  // softmax's denominator (backend.h AttentionShape::sinks; gpt-oss).
  bool attn_sinks = false;
  // The norm before the FFN is called post_attention_norm.weight in its GGUF files, not
  // ffn_norm.weight (llama.cpp's gpt-oss loader: LLM_TENSOR_ATTN_POST_NORM); norms stay Pre.
  bool ffn_norm_named_post_attention = false;
};

}  // namespace llmctl
