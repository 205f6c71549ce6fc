#pragma once
// ModelConfig: the hyperparameters of a Llama-family model, read from GGUF metadata, and the
// switches of its architecture row (arch.h) that the forward pass reads. Every architecture
// uses the "{arch}.key" pattern below.

#include <cstdint>
#include <optional>
#include <string>

#include "core/rope_math.h"
#include "model/arch.h"

namespace llmctl {

class GgufFile;

// YaRN's parameters as GGUF and config.json give them (defaults: the paper's).
struct YarnParams {
  double factor = 1.0;     // context extension factor (> 1)
  int64_t n_ctx_orig = 0;  // the context the model was trained with
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  bool truncate = true;      // floor/ceil the correction range (transformers' truncate)
  double attn_factor = 0.0;  // cos/sin factor; 0: 1 + 0.1 ln(factor)
};

struct ModelConfig {
  std::string arch;                  // general.architecture: a row of kArchRows
  int64_t n_vocab = 0;               // token_embd.weight shape[1]
  int64_t n_embd = 0;                // {arch}.embedding_length
  int64_t n_layers = 0;              // {arch}.block_count
  int64_t n_heads = 0;               // {arch}.attention.head_count
  int64_t n_kv_heads = 0;            // {arch}.attention.head_count_kv (default n_heads)
  int64_t head_dim = 0;              // {arch}.attention.key_length (default n_embd / n_heads)
  int64_t n_ff = 0;                  // {arch}.feed_forward_length
  int64_t n_ctx_train = 0;           // {arch}.context_length
  int64_t n_rot = 0;                 // {arch}.rope.dimension_count (default head_dim)
  float rms_eps = 1e-5f;             // {arch}.attention.layer_norm_rms_epsilon
  double rope_freq_base = 10000.0;   // {arch}.rope.freq_base
  std::string rope_scaling_type;     // {arch}.rope.scaling.type ("" = none, "linear", ...)
  double rope_scaling_factor = 1.0;  // {arch}.rope.scaling.factor
  double rope_freq_scale = 1.0;      // 1 / factor for linear and YaRN scaling, else 1
  // YaRN (rope.scaling.type "yarn"; core/rope_math.h rope_angle): 0 is off; else the ramp
  // between correction pairs [rope_yarn_low, rope_yarn_high] and the cos/sin factor.
  double rope_ext_factor = 0.0;
  double rope_yarn_low = 0.0;
  double rope_yarn_high = 0.0;
  double rope_mscale = 1.0;
  YarnParams rope_yarn;  // what they were derived from (set_rope_yarn; for writers)
  // LongRoPE (phi3; rope_scaling_type "longrope"): a run whose context exceeds this original
  // context divides each pair's frequency by ModelWeights::rope_factors_long, any other run by
  // rope_factors_short (llama.cpp's get_rope_factors); cos/sin are multiplied by rope_mscale,
  // the attention factor sqrt(1 + ln(s) / ln(orig)), s = n_ctx_train / orig. 0: no LongRoPE.
  int64_t rope_longrope_orig_ctx = 0;
  // Switches (apply_arch_row copies the architecture row's; require_implemented refuses
  // the ones the forward pass does not compute yet).
  RopeType rope_type = RopeType::Normal;  // GGUF: the row's gguf_rope; HF: Neox
  bool has_qkv_bias = false;              // q/k/v biases (qwen2)
  QkNorm qk_norm = QkNorm::None;
  NormPlacement norms = NormPlacement::Pre;
  Activation activation = Activation::SwiGlu;
  bool fused_qkv = false;       // wqkv instead of wq, wk, wv
  bool fused_gate_up = false;   // w_gate_up instead of w_gate, w_up
  double embd_scale = 1.0;      // x = token_embd[t] * embd_scale
  double residual_scale = 1.0;  // x += residual_scale * block(x)
  double attn_scale = 0.0;      // scores = q.k * attn_scale; 0: 1 / sqrt(head_dim)
  double logit_scale = 1.0;     // logits = output(x) / logit_scale
  double attn_softcap = 0.0;    // scores = cap * tanh(scores / cap); 0: none
  double final_softcap = 0.0;   // logits = cap * tanh(logits / cap); 0: none
  // Attention temperature (rows with attn_temperature, arch.h): q *= attn_temperature(pos,
  // attn_temp_beta, attn_temp_length) (core/rope_math.h) after RoPE. 0: none.
  double attn_temp_beta = 0.0;
  int64_t attn_temp_length = 0;
  WindowPattern window;         // which layers attend through a sliding window
  int64_t sliding_window = 0;   // its length in positions (0: none)
  // Mixture of experts (arch.h MoeRow; 0 experts: a dense FFN). Every layer routes each token
  // to n_experts_used of n_experts FFNs of n_ff_expert (llama.cpp's build_moe_ffn).
  int64_t n_experts = 0;         // {arch}.expert_count
  int64_t n_experts_used = 0;    // {arch}.expert_used_count, in [1, n_experts]
  int64_t n_ff_expert = 0;       // the row's rule (MoeRow::expert_ff_key)
  int64_t n_ff_shared = 0;       // the shared expert's FFN size (moe_gated_shared_expert)
  bool moe_renormalize = false;  // the k weights divided by their sum (the row's norm_w)
  bool moe_gated_shared_expert = false;
  MoeGating moe_gating = MoeGating::Softmax;  // core/moe_gating.h
  bool moe_router_bias = false;               // ffn_gate_inp.bias
  bool moe_expert_biases = false;             // ffn_{gate,up,down}_exps.bias
  // Attention extras (gpt-oss): an output-projection bias and one sink logit per head.
  bool has_out_bias = false;
  bool has_attn_sinks = false;
  bool ffn_norm_named_post_attention = false;  // ArchRow::ffn_norm_named_post_attention

  int64_t q_dim() const { return n_heads * head_dim; }      // rows of wq
  int64_t kv_dim() const { return n_kv_heads * head_dim; }  // rows of wk, wv
};

// The numbers of a model's shape as GGUF metadata gives them, for any architecture: read and
// validated once, here. config_from_gguf (below) builds the engine's ModelConfig on it (its
// architecture row, and the refusals of what the forward pass does not compute); kvplan's
// planning input (plan/model_config.h) is filled from it by the CLI (cli/kvplan_model.h:
// plan/ may not include model/).
//
// Keys ({arch} = general.architecture), with their checks (a failure is a FileError naming
// the file and the key):
//   embedding_length [1, 2^24], block_count [1, 4096], attention.head_count [1, 4096]   required
//   attention.head_count_kv [1, 4096] (default head_count), dividing head_count
//   feed_forward_length [1, 2^24]; required unless the model is MoE without dense layers
//   context_length [1, 2^30] (0 when absent: the engine requires it)
//   attention.key_length [1, 65536] (default embedding_length / head_count, which must divide)
//   attention.value_length [1, 65536] (default key_length)
//   rope.dimension_count [1, key_length] and even (default key_length)
//   expert_count, expert_used_count, expert_shared_count, expert_feed_forward_length,
//   leading_dense_block_count, attention.kv_lora_rank, attention.q_lora_rank  [0, 2^24]
//   attention.sliding_window [0, 2^30], attention.sliding_window_pattern [1, 2^20] (a period;
//   a per-layer list is only noted)
// and n_vocab from token_embd.weight's shape [n_embd, n_vocab], else the vocab_size key or
// the tokenizer's token list.
struct ModelShape {
  std::string arch;  // general.architecture
  std::string name;  // general.name ("" when absent)
  int64_t n_embd = 0;
  int64_t n_layers = 0;
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;     // K (and Q) head size
  int64_t v_head_dim = 0;   // V head size
  int64_t n_ff = 0;         // dense MLP size (0: MoE without dense layers and no key)
  int64_t n_ctx_train = 0;  // 0: no context_length key
  int64_t n_rot = 0;
  bool n_rot_given = false;  // rope.dimension_count present
  int64_t n_vocab = 0;
  bool has_token_embd = false;  // n_vocab from token_embd.weight
  // The raw sliding-window keys (their meaning depends on the architecture's row, arch.h).
  std::optional<int64_t> sliding_window;
  std::optional<int64_t> sliding_window_period;  // config.json: from layer_types, 0: all slide
  bool sliding_window_period_list = false;       // the pattern key holds a per-layer list
  // Mixture of experts (0 experts: dense) and multi-head latent attention (kv_lora_rank > 0).
  int64_t n_experts = 0, n_experts_used = 0, n_shared_experts = 0, n_ff_expert = 0;
  // The shared expert's FFN size when it has its own (Qwen2-MoE: one, gated; 0: none, or
  // n_shared_experts of n_ff_expert).
  int64_t n_ff_shared = 0;
  int64_t n_dense_layers = 0;
  int64_t kv_lora_rank = 0, q_lora_rank = 0;
  // From the tensor table (never the tensor data).
  bool has_output = false;  // output.weight (else tied to token_embd)
  bool has_q_bias = false;  // blk.0.attn_q.bias
  bool has_q_norm = false;  // blk.0.attn_q_norm.weight
  // config.json only (hf_config.h read_hf_shape; a GGUF says these with its tensor table):
  std::optional<bool> tie_word_embeddings;
  bool attention_bias = false;
  std::optional<bool> use_sliding_window;
};

// Reads and validates the shape; throws FileError as described above.
ModelShape read_gguf_shape(const GgufFile& f);
// Copies the shape's counts, sizes and context into c (the readers' common step; n_rot and the
// switches are theirs).
void apply_shape(const ModelShape& s, ModelConfig& c);

// Reads and validates the config: read_gguf_shape's numbers and checks, then the
// architecture's row. Throws FileError naming the file and the key for an
// unsupported architecture (listing the supported ones), a missing or out-of-range value,
// inconsistent head counts, expert counts the row does not allow (arch.h MoeRow: experts on a
// dense row, none on a MoE row, expert_used_count outside [1, expert_count], dense leading
// layers), or a row asking for math the forward pass does not implement (unimplemented_math
// in arch.h).
// `table`: the architecture rows to accept (the tests pass their own).
ModelConfig config_from_gguf(const GgufFile& file, const ArchTable& table = {});

// Sets c's rope_freq_scale, rope_ext_factor, rope_yarn_low/high and rope_mscale (needs n_rot
// and rope_freq_base). Throws Error for a factor below 1 or a context below 1.
void set_rope_yarn(ModelConfig& c, const YarnParams& y);

}  // namespace llmctl
