// ModelConfig from GGUF metadata (config.h). Every value is range-checked before use, so the
// weight binder and the forward pass can trust it.
#include "model/config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "io/gguf.h"

namespace llmctl {

namespace {

// Upper bounds far above any real model, so that products of these values (buffer sizes)
// cannot overflow int64.
constexpr int64_t kMaxDim = int64_t{1} << 24;

int64_t require_int(const GgufFile& f, const std::string& key, int64_t lo, int64_t hi) {
  const std::optional<int64_t> v = f.get_int(key);
  if (!v) throw FileError(f.path(), fmt::format("missing metadata key '{}'", key));
  if (*v < lo || *v > hi)
    throw FileError(f.path(),
                    fmt::format("metadata '{}' = {} is outside [{}, {}]", key, *v, lo, hi));
  return *v;
}

int64_t optional_int(const GgufFile& f, const std::string& key, int64_t fallback, int64_t lo,
                     int64_t hi) {
  if (!f.find(key)) return fallback;
  return require_int(f, key, lo, hi);
}

// A finite value of float key `key` in (0, inf), or `fallback` when the file has no such key.
double optional_positive(const GgufFile& f, const std::string& key, double fallback) {
  if (!f.find(key)) return fallback;
  const double v = f.get_float_or(key, 0.0);
  if (!(v > 0.0 && std::isfinite(v)))
    throw FileError(f.path(),
                    fmt::format("metadata '{}' = {} must be a finite number above 0", key, v));
  return v;
}

// The sliding window of a row with a window pattern, as llama.cpp reads it: no
// {arch}.attention.sliding_window key means the row's default length (0: every layer is
// global), 0 means every layer is global; the file's attention.sliding_window_pattern (a
// period) and rope.freq_base_swa override the row's.
void read_window(const GgufFile& f, const std::string& a, const ModelShape& s, ModelConfig& c) {
  if (c.window.layers == WindowLayers::None) return;
  if (c.window.length_required && !s.sliding_window)
    throw FileError(f.path(), fmt::format("missing metadata key '{}attention.sliding_window' "
                                          "(architecture '{}' attends through a sliding window "
                                          "on alternate layers; llama.cpp requires the key too)",
                                          a, c.arch));
  c.sliding_window = s.sliding_window.value_or(c.window.default_length);
  if (c.sliding_window == 0) {
    c.window = WindowPattern{};
    return;
  }
  if (c.window.layers == WindowLayers::AllButEveryPeriod) {
    if (s.sliding_window_period_list)
      throw FileError(f.path(), fmt::format("metadata '{}attention.sliding_window_pattern': "
                                            "expected an integer period (a per-layer list is "
                                            "not supported)",
                                            a));
    if (s.sliding_window_period) c.window.period = static_cast<int32_t>(*s.sliding_window_period);
  }
  if (c.window.local_rope_base > 0.0) {
    c.window.local_rope_base = f.get_float_or(a + "rope.freq_base_swa", c.window.local_rope_base);
    if (!(c.window.local_rope_base > 1.0 && std::isfinite(c.window.local_rope_base)))
      throw FileError(f.path(), fmt::format("{}rope.freq_base_swa = {} must be a finite number "
                                            "above 1",
                                            a, c.window.local_rope_base));
  }
}

// Soft-caps and scales, as llama.cpp reads them. A final-logit soft-cap from any file that
// has one (gemma2, gemma3, ...); an attention soft-cap for a row that has one (its default:
// llama.cpp's f_attn_logit_softcapping 50). A row with file_scales (granite): logit_scale is
// required (logits are divided by it); embedding_scale, residual_scale and attention.scale
// are optional (llama.cpp: absent or 0 means no such scale, 1/sqrt(head_dim) for attention).
void read_caps_and_scales(const GgufFile& f, const std::string& a, const ArchRow& row,
                          ModelConfig& c) {
  if (f.find(a + "final_logit_softcapping")) {
    c.final_softcap = f.get_float_or(a + "final_logit_softcapping", 0.0);
    if (!(c.final_softcap >= 0.0 && std::isfinite(c.final_softcap)))
      throw FileError(f.path(),
                      fmt::format("{}final_logit_softcapping = {} must be finite and >= 0", a,
                                  c.final_softcap));
  }
  if (row.attn_softcap > 0.0)
    c.attn_softcap = optional_positive(f, a + "attn_logit_softcapping", row.attn_softcap);
  if (!row.file_scales) return;
  if (!f.find(a + "logit_scale"))
    throw FileError(f.path(), fmt::format("missing metadata key '{}logit_scale'", a));
  c.logit_scale = optional_positive(f, a + "logit_scale", 1.0);
  const auto zero_is_none = [&](const std::string& key, double none) {
    return f.find(key) && f.get_float_or(key, 0.0) == 0.0 ? none : optional_positive(f, key, none);
  };
  c.embd_scale = zero_is_none(a + "embedding_scale", 1.0);
  c.residual_scale = zero_is_none(a + "residual_scale", 1.0);
  c.attn_scale = zero_is_none(a + "attention.scale", 0.0);
}

// YaRN's keys as llama.cpp reads them: the original context (default the training context),
// beta_fast/beta_slow, and the attention factor. llama.cpp's cos/sin factor comes out as
// (1 + 0.1 ln factor) * rope.scaling.attn_factor, or with rope.scaling.yarn_log_multiplier m
// (DeepSeek-style) as (1 + 0.1 ln factor) / (1 + 0.1 m ln factor) * attn_factor.
void read_yarn(const GgufFile& f, const std::string& a, ModelConfig& c) {
  YarnParams y;
  y.factor = c.rope_scaling_factor;
  y.n_ctx_orig = optional_int(f, a + "rope.scaling.original_context_length", c.n_ctx_train, 1,
                              int64_t{1} << 30);
  y.beta_fast = f.get_float_or(a + "rope.scaling.yarn_beta_fast", 32.0);
  y.beta_slow = f.get_float_or(a + "rope.scaling.yarn_beta_slow", 1.0);
  const double log_mul = f.get_float_or(a + "rope.scaling.yarn_log_multiplier", 0.0);
  const double attn = f.get_float_or(a + "rope.scaling.attn_factor", 1.0);
  for (const double v : {y.beta_fast, y.beta_slow, attn})
    if (!(v > 0.0 && std::isfinite(v)))
      throw FileError(f.path(), fmt::format("{}rope.scaling: YaRN beta_fast {}, beta_slow {} and "
                                            "attn_factor {} must be finite and > 0",
                                            a, y.beta_fast, y.beta_slow, attn));
  if (!std::isfinite(log_mul))
    throw FileError(f.path(), fmt::format("{}rope.scaling.yarn_log_multiplier is not finite", a));
  const double m = y.factor > 1.0 ? 1.0 + 0.1 * std::log(y.factor) : 1.0;
  const double m_all = y.factor > 1.0 ? 1.0 + 0.1 * log_mul * std::log(y.factor) : 1.0;
  y.attn_factor = (log_mul != 0.0 ? m / m_all : m) * attn;
  set_rope_yarn(c, y);
}

// The expert FFN sizes by a row's rule (MoeRow): the expert's (expert_feed_forward_length,
// else feed_forward_length / expert_used_count, for a row with expert_ff_key;
// feed_forward_length for llama) and the shared expert's (expert_shared_feed_forward_length,
// else feed_forward_length, for a row with a gated shared expert; else 0). 0 where the
// fallback is missing too. read_experts (the engine) and read_gguf_shape (kvplan) both use it.
struct ExpertSizes {
  int64_t expert = 0, shared = 0;
};
ExpertSizes expert_sizes(const GgufFile& f, const std::string& a, int64_t n_ff, int64_t n_used,
                         const MoeRow& row) {
  ExpertSizes e;
  const std::string ff_key = a + "expert_feed_forward_length";
  if (!row.expert_ff_key)
    e.expert = n_ff;
  else if (f.find(ff_key))
    e.expert = require_int(f, ff_key, 1, kMaxDim);
  else
    e.expert = n_used > 0 ? n_ff / n_used : 0;
  if (row.gated_shared_expert) {
    const std::string key = a + "expert_shared_feed_forward_length";
    e.shared = f.find(key) ? require_int(f, key, 1, kMaxDim) : n_ff;
  }
  return e;
}

// The mixture of experts, as llama.cpp's loaders read it for the row (MoeRow): expert_count,
// expert_used_count in [1, expert_count], the expert FFN size (expert_feed_forward_length, else
// feed_forward_length / expert_used_count, for a row with expert_ff_key; feed_forward_length
// for llama) and the shared expert's (expert_shared_feed_forward_length, else
// feed_forward_length). A row without experts, or a file with dense leading layers (DeepSeek's
// leading_dense_block_count), is refused; so is a MoE row's file without experts.
void read_experts(const GgufFile& f, const std::string& a, const ModelShape& s, const MoeRow& row,
                  ModelConfig& c) {
  const auto need_n_ff = [&](const char* what) {
    if (s.n_ff < 1)
      throw FileError(f.path(), fmt::format("missing metadata key '{}feed_forward_length' (the {} "
                                            "size without its own key)",
                                            a, what));
    return s.n_ff;
  };
  if (s.n_experts == 0) {
    if (row.experts == MoeExperts::Required)
      throw FileError(f.path(), fmt::format("missing metadata key '{}expert_count' (architecture "
                                            "'{}' is a mixture of experts)",
                                            a, c.arch));
    (void)need_n_ff("dense FFN");
    return;
  }
  if (row.experts == MoeExperts::None)
    throw FileError(f.path(), fmt::format("{}expert_count = {}: architecture '{}' has no "
                                          "mixture-of-experts form in llmctl",
                                          a, s.n_experts, c.arch));
  if (s.n_dense_layers > 0)
    throw FileError(f.path(), fmt::format("{}leading_dense_block_count = {}: dense layers before "
                                          "the expert layers are not supported",
                                          a, s.n_dense_layers));
  if (s.n_experts_used < 1 || s.n_experts_used > s.n_experts)
    throw FileError(f.path(), fmt::format("{}expert_used_count = {} is outside [1, expert_count = "
                                          "{}]",
                                          a, s.n_experts_used, s.n_experts));
  c.n_experts = s.n_experts;
  c.n_experts_used = s.n_experts_used;
  const ExpertSizes e = expert_sizes(f, a, s.n_ff, c.n_experts_used, row);
  const bool expert_key = row.expert_ff_key && f.find(a + "expert_feed_forward_length");
  if (!expert_key) (void)need_n_ff("expert FFN");
  c.n_ff_expert = e.expert;
  if (c.n_ff_expert < 1)
    throw FileError(f.path(), fmt::format("{}feed_forward_length = {} / expert_used_count = {} "
                                          "leaves no expert FFN",
                                          a, s.n_ff, c.n_experts_used));
  if (row.gated_shared_expert) {
    if (!f.find(a + "expert_shared_feed_forward_length")) (void)need_n_ff("shared expert");
    c.n_ff_shared = e.shared;
  }
}

// The attention temperature of a row with one, as llama.cpp's mistral3 reads it: beta from
// attention.temperature_scale (absent or 0: none), its length the YaRN original context
// (n_ctx_orig_yarn: rope.scaling.original_context_length, default the training context).
void read_attn_temperature(const GgufFile& f, const std::string& a, ModelConfig& c) {
  const std::string key = a + "attention.temperature_scale";
  c.attn_temp_beta = f.get_float_or(key, 0.0);
  if (!std::isfinite(c.attn_temp_beta))
    throw FileError(f.path(), fmt::format("metadata '{}' = {} is not finite", key,
                                          c.attn_temp_beta));
  if (c.attn_temp_beta != 0.0)
    c.attn_temp_length = optional_int(f, a + "rope.scaling.original_context_length",
                                      c.n_ctx_train, 1, int64_t{1} << 30);
}

}  // namespace

void set_rope_yarn(ModelConfig& c, const YarnParams& y) {
  if (!(y.factor >= 1.0 && std::isfinite(y.factor)) || y.n_ctx_orig < 1)
    throw Error(
        fmt::format("YaRN factor {} must be at least 1 and its original context {} "
                    "at least 1",
                    y.factor, y.n_ctx_orig));
  c.rope_scaling_type = "yarn";
  c.rope_yarn = y;
  c.rope_scaling_factor = y.factor;
  c.rope_freq_scale = 1.0 / y.factor;
  c.rope_ext_factor = 1.0;
  if (y.truncate) {
    rope_yarn_corr_range(c.n_rot, y.n_ctx_orig, c.rope_freq_base, y.beta_fast, y.beta_slow,
                         &c.rope_yarn_low, &c.rope_yarn_high);
  } else {
    c.rope_yarn_low =
        std::max(0.0, rope_yarn_corr_pair(c.n_rot, y.n_ctx_orig, y.beta_fast, c.rope_freq_base));
    c.rope_yarn_high =
        std::min(static_cast<double>(c.n_rot - 1),
                 rope_yarn_corr_pair(c.n_rot, y.n_ctx_orig, y.beta_slow, c.rope_freq_base));
  }
  c.rope_mscale =
      y.attn_factor > 0.0 ? y.attn_factor : (y.factor > 1.0 ? 1.0 + 0.1 * std::log(y.factor) : 1.0);
}

ModelShape read_gguf_shape(const GgufFile& f) {
  ModelShape s;
  s.arch = f.get_string_or("general.architecture", "");
  if (s.arch.empty()) throw FileError(f.path(), "missing metadata key 'general.architecture'");
  s.name = f.get_string_or("general.name", "");
  const std::string a = s.arch + ".";
  s.n_embd = require_int(f, a + "embedding_length", 1, kMaxDim);
  s.n_layers = require_int(f, a + "block_count", 1, 4096);
  s.n_heads = require_int(f, a + "attention.head_count", 1, 4096);
  s.n_kv_heads = optional_int(f, a + "attention.head_count_kv", s.n_heads, 1, 4096);
  s.n_experts = optional_int(f, a + "expert_count", 0, 0, kMaxDim);
  s.n_dense_layers = optional_int(f, a + "leading_dense_block_count", 0, 0, s.n_layers);
  // A mixture of experts without dense layers may have no dense MLP size.
  s.n_ff = s.n_experts > 0 && s.n_dense_layers == 0
               ? optional_int(f, a + "feed_forward_length", 0, 0, kMaxDim)
               : require_int(f, a + "feed_forward_length", 1, kMaxDim);
  s.n_ctx_train = optional_int(f, a + "context_length", 0, 1, int64_t{1} << 30);

  if (s.n_heads % s.n_kv_heads != 0)
    throw FileError(f.path(), fmt::format("{}attention.head_count_kv = {} does not divide "
                                          "head_count = {}",
                                          a, s.n_kv_heads, s.n_heads));
  if (f.find(a + "attention.key_length")) {
    s.head_dim = require_int(f, a + "attention.key_length", 1, 65536);
  } else {
    if (s.n_embd % s.n_heads != 0)
      throw FileError(f.path(), fmt::format("{}attention.head_count = {} does not divide "
                                            "embedding_length = {}",
                                            a, s.n_heads, s.n_embd));
    s.head_dim = s.n_embd / s.n_heads;
  }
  s.v_head_dim = optional_int(f, a + "attention.value_length", s.head_dim, 1, 65536);
  s.n_rot_given = f.find(a + "rope.dimension_count") != nullptr;
  s.n_rot = optional_int(f, a + "rope.dimension_count", s.head_dim, 1, s.head_dim);
  if (s.n_rot % 2 != 0)
    throw FileError(f.path(), fmt::format("{}rope.dimension_count = {} is odd", a, s.n_rot));

  if (const GgufTensorInfo* embd = f.find_tensor("token_embd.weight")) {
    if (embd->shape.size() != 2 || embd->shape[1] < 1 || embd->shape[1] > kMaxDim)
      throw FileError(f.path(),
                      "tensor 'token_embd.weight': expected 2 dimensions [n_embd, n_vocab]");
    s.n_vocab = embd->shape[1];
    s.has_token_embd = true;
  } else {
    s.n_vocab = optional_int(f, a + "vocab_size", 0, 1, kMaxDim);
    if (s.n_vocab == 0)
      s.n_vocab = static_cast<int64_t>(f.get_string_array("tokenizer.ggml.tokens").size());
    if (s.n_vocab == 0)
      throw FileError(f.path(),
                      "missing tensor 'token_embd.weight' (and no vocab_size key or "
                      "token list that gives the vocabulary size)");
  }

  s.n_experts_used = optional_int(f, a + "expert_used_count", 0, 0, kMaxDim);
  s.n_shared_experts = optional_int(f, a + "expert_shared_count", 0, 0, kMaxDim);
  if (s.n_experts > 0) {
    // The engine's rule for a row it runs; else (kvplan only) the key, or feed_forward_length.
    const ArchRow* row = find_arch_by_gguf(s.arch);
    MoeRow rule;
    rule.expert_ff_key = true;
    if (row != nullptr && row->moe.experts != MoeExperts::None) rule = row->moe;
    const ExpertSizes e = expert_sizes(f, a, s.n_ff, row != nullptr ? s.n_experts_used : 1, rule);
    s.n_ff_expert = e.expert;
    s.n_ff_shared = e.shared;
  }
  s.kv_lora_rank = optional_int(f, a + "attention.kv_lora_rank", 0, 0, kMaxDim);
  s.q_lora_rank = optional_int(f, a + "attention.q_lora_rank", 0, 0, kMaxDim);

  const std::string window_key = a + "attention.sliding_window";
  if (f.find(window_key)) s.sliding_window = require_int(f, window_key, 0, int64_t{1} << 30);
  const std::string period_key = a + "attention.sliding_window_pattern";
  if (f.find(period_key)) {
    if (f.get_int(period_key))
      s.sliding_window_period = require_int(f, period_key, 1, int64_t{1} << 20);
    else
      s.sliding_window_period_list = true;
  }

  s.has_output = f.find_tensor("output.weight") != nullptr;
  s.has_q_bias = f.find_tensor("blk.0.attn_q.bias") != nullptr;
  s.has_q_norm = f.find_tensor("blk.0.attn_q_norm.weight") != nullptr;
  return s;
}

void apply_shape(const ModelShape& s, ModelConfig& c) {
  c.n_vocab = s.n_vocab;
  c.n_embd = s.n_embd;
  c.n_layers = s.n_layers;
  c.n_heads = s.n_heads;
  c.n_kv_heads = s.n_kv_heads;
  c.n_ff = s.n_ff;
  c.n_ctx_train = s.n_ctx_train;
  c.head_dim = s.head_dim;
}

ModelConfig config_from_gguf(const GgufFile& f, const ArchTable& table) {
  ModelConfig c;
  const std::string name = f.get_string_or("general.architecture", "");
  const ArchRow* row = find_arch_by_gguf(name, table);
  if (row == nullptr)
    throw FileError(f.path(), fmt::format("architecture '{}' is not supported (supported: {})",
                                          name, arch_gguf_names(table)));
  c.arch = row->gguf_name;
  c.rope_type = row->gguf_rope;
  const std::string a = c.arch + ".";

  const ModelShape s = read_gguf_shape(f);
  // What the shape allows and the engine does not compute (yet).
  if (s.n_ctx_train == 0) (void)require_int(f, a + "context_length", 1, int64_t{1} << 30);
  if (s.v_head_dim != s.head_dim)
    throw FileError(f.path(), fmt::format("{}attention.value_length = {} differs from "
                                          "key_length = {} (not supported)",
                                          a, s.v_head_dim, s.head_dim));
  apply_shape(s, c);
  c.n_rot = s.n_rot;

  const double eps = f.get_float_or(a + "attention.layer_norm_rms_epsilon", 1e-5);
  if (!(eps > 0.0 && eps < 1.0))
    throw FileError(f.path(), fmt::format("{}attention.layer_norm_rms_epsilon = {} is outside "
                                          "(0, 1)",
                                          a, eps));
  c.rms_eps = static_cast<float>(eps);

  c.rope_freq_base = f.get_float_or(a + "rope.freq_base", 10000.0);
  if (!(c.rope_freq_base > 1.0 && std::isfinite(c.rope_freq_base)))
    throw FileError(f.path(), fmt::format("{}rope.freq_base = {} must be a finite number above 1",
                                          a, c.rope_freq_base));

  c.rope_scaling_type = f.get_string_or(a + "rope.scaling.type", "");
  if (c.rope_scaling_type == "none") c.rope_scaling_type.clear();
  c.rope_scaling_factor = f.get_float_or(a + "rope.scaling.factor", 1.0);
  if (!c.rope_scaling_type.empty()) {
    if (c.rope_scaling_type != "linear" && c.rope_scaling_type != "yarn")
      throw FileError(f.path(), fmt::format("{}rope.scaling.type '{}' is not supported "
                                            "(supported: none, linear, yarn)",
                                            a, c.rope_scaling_type));
    if (!(c.rope_scaling_factor >= 1.0 && std::isfinite(c.rope_scaling_factor)))
      throw FileError(f.path(), fmt::format("{}rope.scaling.factor = {} must be at least 1", a,
                                            c.rope_scaling_factor));
    c.rope_freq_scale = 1.0 / c.rope_scaling_factor;
  }
  if (c.rope_scaling_type == "yarn") read_yarn(f, a, c);

  // Llama 3.1-style rope scaling stores per-pair frequency divisors as the tensor
  // 'rope_freqs.weight' (bind_weights() binds it), with no scaling key.
  // LongRoPE has no scaling key either (convert_hf_to_gguf's Phi3MiniModel): its two divisor
  // tensors, the original context and the attention factor.
  if (f.find_tensor("rope_factors_long.weight") != nullptr) {
    if (!c.rope_scaling_type.empty())
      throw FileError(f.path(), fmt::format("rope_factors_long.weight with {}rope.scaling.type "
                                            "'{}' (not supported)",
                                            a, c.rope_scaling_type));
    c.rope_scaling_type = "longrope";
    c.rope_longrope_orig_ctx = optional_int(f, a + "rope.scaling.original_context_length",
                                            c.n_ctx_train, 1, int64_t{1} << 30);
    c.rope_mscale = optional_positive(f, a + "rope.scaling.attn_factor", 1.0);
  }

  if (!s.has_token_embd) throw FileError(f.path(), "missing tensor 'token_embd.weight'");

  apply_arch_row(*row, c);
  read_experts(f, a, s, row->moe, c);
  read_window(f, a, s, c);
  read_caps_and_scales(f, a, *row, c);
  if (row->attn_temperature) read_attn_temperature(f, a, c);
  const std::string missing = unimplemented_message(c);
  if (!missing.empty()) throw FileError(f.path(), missing);
  return c;
}

}  // namespace llmctl
