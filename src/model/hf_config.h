#pragma once
// ModelConfig from a Hugging Face config.json (the hf_classes of kArchRows, arch.h),
// range-checked with the same limits as config_from_gguf.
//
// RoPE pairing. Hugging Face's Llama, Mistral and Qwen2 rotate with "rotate_half": dims i and
// i + head_dim / 2 of a head form a pair, which is llama.cpp's NEOX pairing. So a model read
// from a HF directory gets rope_type = Neox and runs on its weights in place, whatever the
// architecture. (A GGUF llama file is different: convert_hf_to_gguf permutes the rows of Q and
// K so that the interleaved NORMAL pairing (2i, 2i + 1) computes the same thing; hf_to_gguf.h
// does the same permutation when it writes one.)
//
// Keys read (transformers v4 and v5 spellings):
//   architectures[0], vocab_size, hidden_size, num_hidden_layers, num_attention_heads,
//   num_key_value_heads (default num_attention_heads), head_dim (default hidden / heads),
//   intermediate_size, max_position_embeddings, rms_norm_eps, tie_word_embeddings,
//   hidden_act (the row's activation: silu), rope_theta (top level, or in rope_parameters),
//   rope_scaling (v4) or rope_parameters (v5): {"rope_type" or "type": "default" | "linear" |
//   "llama3" | "yarn" | "longrope" (or "su"), "factor", "low_freq_factor", "high_freq_factor",
//   "original_max_position_embeddings" (longrope: also top level, as Phi3Config has it),
//   "long_factor", "short_factor", "attention_factor", "partial_rotary_factor"},
//   hidden_activation (Gemma's name for it, preferred when present),
//   sliding_window / use_sliding_window / layer_types (the row's hf_window), attention_bias /
//   mlp_bias (rows with hf_bias_keys), final_logit_softcapping (any row), attn_logit_softcapping
//   (rows with an attention soft-cap; null means no cap, absent the row's default),
//   query_pre_attn_scalar (rows with hf_query_pre_attn_scalar), embedding_multiplier,
//   residual_multiplier, attention_multiplier, logits_scaling (rows with file_scales),
//   sliding_window_pattern, rope_local_base_freq and rope_parameters.{full,sliding}_attention
//   (Gemma 3), rope_parameters.llama_4_scaling_beta (rows with attn_temperature),
//   bos_token_id, eos_token_id (an id or a list, the first is kept), torch_dtype / dtype.

#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"

namespace llmctl {

struct HfConfig {
  std::string architecture;  // architectures[0], e.g. "LlamaForCausalLM"
  ModelConfig config;        // the row's switches (apply_arch_row); rope_type Neox
  bool tie_word_embeddings = false;
  std::string rope_scaling_type;  // "" (none), "linear", "llama3", "yarn" or "longrope"
  // (n_rot / 2,) per-pair frequency divisors for rope_type "llama3" (see ModelWeights::
  // rope_freqs), computed like transformers' _compute_llama3_parameters: the divisor is
  // inv_freq / inv_freq_llama. Empty for other rope types.
  std::vector<float> rope_freqs;
  // Raw llama3 parameters, kept for writing the GGUF and for reports.
  double rope_llama3_factor = 1.0, rope_low_freq_factor = 1.0, rope_high_freq_factor = 4.0;
  int64_t rope_original_ctx = 0;
  // rope_type "longrope": long_factor and short_factor (n_rot / 2 each; ModelWeights::
  // rope_factors_long / _short). Empty for other rope types.
  std::vector<float> rope_long_factor, rope_short_factor;
  // The windowed layers' RoPE base of a row with one (Gemma 3; WindowPattern::local_rope_base),
  // 0 for other rows.
  double rope_local_base = 0.0;
  int64_t bos_token_id = -1;  // -1: absent
  int64_t eos_token_id = -1;
  std::string torch_dtype;  // "float32", "bfloat16", ... ("" when absent)
};

// Parses config.json text; `path` names the file in errors. Throws FileError naming the key
// for an unsupported architecture, a missing, mistyped or out-of-range value, inconsistent
// head counts or an unsupported rope scaling.
// `table`: the architecture rows to accept (their hf_classes; the tests pass their own).
HfConfig hf_config_from_json(const std::string& text, const std::string& path,
                             const ArchTable& table = {});
// Reads and parses the file at `path`.
HfConfig read_hf_config(const std::string& path);

// The numbers of a model's shape from a config.json, for any model_type: the config.json
// counterpart of read_gguf_shape (config.h), read and range-checked once with the messages of
// hf_config_from_json, which builds on it; kvplan fills its planning input from it
// (cli/kvplan_model.h). The keys are those of the top level, or of text_config when the top
// level has no hidden_size (a multimodal config). Keys: model_type (arch), _name_or_path
// (name), vocab_size, hidden_size, num_hidden_layers, num_attention_heads (required),
// num_key_value_heads (dividing num_attention_heads), intermediate_size (required unless MoE
// without dense layers), max_position_embeddings (0 when absent), head_dim; MoE:
// num_local_experts / num_experts / n_routed_experts, num_experts_per_tok (then required),
// n_shared_experts, first_k_dense_replace, moe_intermediate_size; MLA: kv_lora_rank,
// q_lora_rank, qk_rope_head_dim, qk_nope_head_dim, v_head_dim (the last three then required;
// head_dim = qk_nope + qk_rope, n_rot = qk_rope); tie_word_embeddings, attention_bias,
// use_sliding_window, sliding_window, layer_types (sliding_window_period: the 1-based index of
// the first "full_attention", 0 when none is).
ModelShape read_hf_shape(const std::string& path);

// The llama3 divisors alone: n_rot / 2 values for pairs i = 0 .. n_rot / 2 - 1.
std::vector<float> llama3_rope_divisors(int64_t n_rot, double freq_base, double factor,
                                        double low_freq_factor, double high_freq_factor,
                                        int64_t original_ctx);

}  // namespace llmctl
