// config.json -> ModelConfig (hf_config.h). Every value is type- and range-checked before use,
// with the limits of config.cpp, so the weight binder and the forward pass can trust it.
#include "model/hf_config.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/mapped_file.h"
#include "io/json_error.h"

namespace llmctl {

using nlohmann::json;

namespace {

constexpr int64_t kMaxDim = int64_t{1} << 24;  // as config.cpp: products cannot overflow int64
constexpr uint64_t kMaxConfigBytes = 16ull << 20;
constexpr double kPi = 3.14159265358979323846;

// One object's keys with the file's path, for typed, range-checked reads. A key present with
// value null counts as absent (transformers writes e.g. "sliding_window": null).
class Keys {
 public:
  Keys(const json& obj, std::string path, std::string prefix = {})
      : obj_(obj), path_(std::move(path)), prefix_(std::move(prefix)) {}

  const json* get(const char* key) const {
    const auto it = obj_.find(key);
    return it == obj_.end() || it->is_null() ? nullptr : &*it;
  }
  // Present with value null (transformers' None: "no such cap", where absent means the
  // config class's default).
  bool is_null(const char* key) const {
    const auto it = obj_.find(key);
    return it != obj_.end() && it->is_null();
  }
  [[noreturn]] void fail(const char* key, const std::string& what) const {
    throw FileError(path_, fmt::format("'{}{}' {}", prefix_, key, what));
  }

  int64_t require_int(const char* key, int64_t lo, int64_t hi) const {
    const json* v = get(key);
    if (v == nullptr) fail(key, "is missing");
    if (!v->is_number_integer()) fail(key, fmt::format("is {}, expected an integer", dump(*v)));
    const bool huge = v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(hi);
    if (huge || v->get<int64_t>() < lo || v->get<int64_t>() > hi)
      fail(key, fmt::format("= {} is outside [{}, {}]", dump(*v), lo, hi));
    return v->get<int64_t>();
  }
  int64_t optional_int(const char* key, int64_t fallback, int64_t lo, int64_t hi) const {
    return get(key) == nullptr ? fallback : require_int(key, lo, hi);
  }
  // A finite number in (lo, hi] (lo_open) or [lo, hi].
  double number(const char* key, double fallback, double lo, double hi, bool lo_open) const {
    const json* v = get(key);
    if (v == nullptr) return fallback;
    if (!v->is_number()) fail(key, fmt::format("is {}, expected a number", dump(*v)));
    const double x = v->get<double>();
    if (!std::isfinite(x) || (lo_open ? x <= lo : x < lo) || x > hi)
      fail(key, fmt::format("= {} is outside {}{}, {}]", dump(*v), lo_open ? "(" : "[", lo, hi));
    return x;
  }
  bool boolean(const char* key, bool fallback) const {
    const json* v = get(key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) fail(key, fmt::format("is {}, expected true or false", dump(*v)));
    return v->get<bool>();
  }
  std::string string(const char* key, std::string fallback) const {
    const json* v = get(key);
    if (v == nullptr) return fallback;
    if (!v->is_string()) fail(key, fmt::format("is {}, expected a string", dump(*v)));
    return v->get<std::string>();
  }
  // A list of exactly n finite numbers above 0 (LongRoPE's factors, divisors of frequencies).
  std::vector<float> divisors(const char* key, int64_t n) const {
    const json* v = get(key);
    if (v == nullptr) fail(key, "is missing");
    bool ok = v->is_array() && static_cast<int64_t>(v->size()) == n;
    for (size_t i = 0; ok && i < v->size(); ++i)
      ok = (*v)[i].is_number() && (*v)[i].get<double>() > 0.0 &&
           std::isfinite((*v)[i].get<double>());
    if (!ok) fail(key, fmt::format("is {}, expected {} numbers above 0 (n_rot / 2)", dump(*v), n));
    return v->get<std::vector<float>>();
  }
  // A token id, or the first of a list of ids (Llama 3 lists several eos ids); -1 if absent.
  int64_t token_id(const char* key) const {
    const json* v = get(key);
    if (v != nullptr && v->is_array()) {
      if (v->empty() || !(*v)[0].is_number_integer() || (*v)[0].get<int64_t>() < 0)
        fail(key, fmt::format("is {}, expected a token id or a list of them", dump(*v)));
      return (*v)[0].get<int64_t>();
    }
    return optional_int(key, -1, 0, kMaxDim);
  }

 private:
  static std::string dump(const json& v) {
    const std::string s = v.dump();
    return s.size() > 60 ? s.substr(0, 60) + "..." : s;
  }
  const json& obj_;
  std::string path_;
  std::string prefix_;
};

// config.json's name of an activation.
const char* hf_activation_name(Activation a) {
  return a == Activation::SwiGlu ? "silu" : "gelu_pytorch_tanh";
}

// What config.json keys mean for the architecture's row, beyond the common keys.
void apply_architecture(HfConfig& h, const ArchRow& row, const Keys& k) {
  ModelConfig& c = h.config;
  if (row.hf_bias_keys) {
    if (k.boolean("attention_bias", false))
      k.fail("attention_bias", "= true is not supported (q/k/v/o biases)");
    if (k.boolean("mlp_bias", false)) k.fail("mlp_bias", "= true is not supported");
  }
  switch (row.hf_window) {
    case HfWindowKey::None:
      break;
    case HfWindowKey::UniformClampsContext: {
      // Mistral's sliding-window attention equals full attention while the context is within
      // the window, so the model runs exactly up to there: that becomes its training context.
      const int64_t window = k.optional_int("sliding_window", 0, 1, int64_t{1} << 30);
      if (window > 0 && window < c.n_ctx_train) c.n_ctx_train = window;
      break;
    }
    case HfWindowKey::GatedRefused:
      if (k.boolean("use_sliding_window", false))
        k.fail("use_sliding_window", "= true is not supported (sliding-window attention)");
      break;
    case HfWindowKey::PatternLength:  // needs the row's pattern: apply_row_values
    case HfWindowKey::PatternPeriod:
      break;
  }
}

// A soft-cap: the number, 0 for null (None: no cap), `fallback` (the class default) if absent.
double softcap_key(const Keys& k, const char* key, double fallback) {
  return k.is_null(key) ? 0.0 : k.number(key, fallback, 0.0, 1e9, false);
}

// What config.json says about the row's switches, once apply_arch_row has copied them:
// the window pattern's length (checked against layer_types), soft-caps, the attention scale
// (query_pre_attn_scalar) and the file scales (granite's multipliers, transformers' defaults
// 1 when absent).
void apply_row_values(ModelConfig& c, const ArchRow& row, const Keys& k) {
  if (row.hf_window == HfWindowKey::PatternLength || row.hf_window == HfWindowKey::PatternPeriod) {
    // null (None) is no window, as in transformers; absent is the class default (gemma2's;
    // a PatternPeriod row requires the key).
    const bool period_key = row.hf_window == HfWindowKey::PatternPeriod;
    if (period_key && k.get("sliding_window") == nullptr && !k.is_null("sliding_window"))
      k.fail("sliding_window", "is missing");
    c.sliding_window =
        k.is_null("sliding_window")
            ? 0
            : k.optional_int("sliding_window", row.window.default_length, 0, int64_t{1} << 30);
    if (period_key)  // transformers v4's pattern; v5 lists layer_types (checked below)
      c.window.period = static_cast<int32_t>(
          k.optional_int("sliding_window_pattern", c.window.period, 1, 1 << 20));
    if (c.sliding_window == 0) c.window = WindowPattern{};
    if (const json* types = k.get("layer_types")) {
      if (!types->is_array() || static_cast<int64_t>(types->size()) != c.n_layers)
        k.fail("layer_types", fmt::format("is not a list of {} layer types", c.n_layers));
      for (int64_t il = 0; il < c.n_layers; ++il) {
        const json& t = (*types)[static_cast<size_t>(il)];
        const char* want = layer_windowed(c, il) ? "sliding_attention" : "full_attention";
        if (!t.is_string() || t.get<std::string>() != want)
          k.fail("layer_types", fmt::format("[{}] is {}, expected \"{}\" ({}'s pattern with "
                                            "sliding_window {})",
                                            il, t.dump(), want, row.gguf_name, c.sliding_window));
      }
    }
  }
  c.final_softcap = softcap_key(k, "final_logit_softcapping", c.final_softcap);
  if (row.attn_softcap > 0.0)
    c.attn_softcap = softcap_key(k, "attn_logit_softcapping", c.attn_softcap);
  if (row.hf_query_pre_attn_scalar)  // transformers' Gemma default 256
    c.attn_scale = 1.0 / std::sqrt(k.number("query_pre_attn_scalar", 256.0, 0.0, 1e9, true));
  if (row.file_scales) {
    c.embd_scale = k.number("embedding_multiplier", 1.0, 0.0, 1e6, true);
    c.residual_scale = k.number("residual_multiplier", 1.0, 0.0, 1e6, true);
    c.attn_scale = k.number("attention_multiplier", 1.0, 0.0, 1e6, true);
    c.logit_scale = k.number("logits_scaling", 1.0, 0.0, 1e6, true);
  }
}

// The sliding layers' RoPE base of a row whose windowed layers have their own (Gemma 3):
// rope_parameters.sliding_attention (v5; RoPE scaling there is refused) or rope_local_base_freq
// (v4), default the row's. Returns the section the global layers' RoPE is read from
// (rope_parameters.full_attention in v5), or nullptr to read the usual one.
const json* apply_local_rope(HfConfig& h, const ArchRow& row, const json* rope, const Keys& top,
                             const std::string& path) {
  if (row.window.local_rope_base <= 0.0) return nullptr;
  h.rope_local_base =
      top.number("rope_local_base_freq", row.window.local_rope_base, 1.0, 1e12, true);
  if (rope == nullptr || !rope->contains("sliding_attention")) return nullptr;
  const json* local = &(*rope)["sliding_attention"];
  const json* global = rope->contains("full_attention") ? &(*rope)["full_attention"] : nullptr;
  if (!local->is_object() || (global != nullptr && !global->is_object()))
    top.fail("rope_parameters", "sliding_attention and full_attention must be JSON objects");
  const Keys l(*local, path, "rope_parameters.sliding_attention.");
  h.rope_local_base = l.number("rope_theta", row.window.local_rope_base, 1.0, 1e12, true);
  const std::string type = l.string("rope_type", l.string("type", "default"));
  if (type != "default")
    l.fail("rope_type", fmt::format("'{}' is not supported (the sliding layers rotate without "
                                    "scaling, as llama.cpp's)",
                                    type));
  static const json empty = json::object();
  return global != nullptr ? global : &empty;
}

// rope_theta and rope scaling, from rope_parameters (transformers v5) or rope_theta and
// rope_scaling (v4); for a row with local and global RoPE, the global layers'.
void apply_rope(HfConfig& h, const ArchRow& row, const json& j, const Keys& top,
                const std::string& path) {
  ModelConfig& c = h.config;
  std::string section = j.contains("rope_parameters") ? "rope_parameters" : "rope_scaling";
  const json* rope = top.get(section.c_str());
  if (rope != nullptr && !rope->is_object()) top.fail(section.c_str(), "is not a JSON object");
  if (const json* global = apply_local_rope(h, row, rope, top, path)) {
    rope = global;
    section += ".full_attention";
  }
  static const json empty = json::object();
  const Keys r(rope != nullptr ? *rope : empty, path, section + ".");

  const double theta_top = top.number("rope_theta", row.hf_rope_theta, 1.0, 1e12, true);
  c.rope_freq_base = r.number("rope_theta", theta_top, 1.0, 1e12, true);
  const double partial =
      r.number("partial_rotary_factor", top.number("partial_rotary_factor", 1.0, 0.0, 1.0, true),
               0.0, 1.0, true);
  c.n_rot = static_cast<int64_t>(static_cast<double>(c.head_dim) * partial);
  if (c.n_rot < 2 || c.n_rot % 2 != 0)
    r.fail("partial_rotary_factor", fmt::format("gives {} rotary dims; expected an even number "
                                                ">= 2",
                                                c.n_rot));

  if (row.attn_temperature) {
    // Ministral 3 (transformers' get_llama_4_attn_scale reads both keys, with no default).
    if (r.get("llama_4_scaling_beta") == nullptr) r.fail("llama_4_scaling_beta", "is missing");
    c.attn_temp_beta = r.number("llama_4_scaling_beta", 0.0, -1e6, 1e6, false);
    c.attn_temp_length = r.require_int("original_max_position_embeddings", 1, int64_t{1} << 30);
  }
  std::string type = r.string("rope_type", r.string("type", "default"));
  if (type == "default") type.clear();
  h.rope_scaling_type = type;
  if (type.empty()) return;
  if (type == "linear") {
    c.rope_scaling_type = "linear";
    c.rope_scaling_factor = r.number("factor", 1.0, 1.0, 1e6, false);
    c.rope_freq_scale = 1.0 / c.rope_scaling_factor;
  } else if (type == "llama3") {
    // Represented as per-pair divisors, like GGUF's rope_freqs.weight; no scaling type.
    h.rope_llama3_factor = r.number("factor", 8.0, 1.0, 1e6, false);
    h.rope_low_freq_factor = r.number("low_freq_factor", 1.0, 0.0, 1e6, true);
    h.rope_high_freq_factor = r.number("high_freq_factor", 4.0, 0.0, 1e6, true);
    if (h.rope_high_freq_factor <= h.rope_low_freq_factor)
      r.fail("high_freq_factor", fmt::format("= {} must exceed low_freq_factor = {}",
                                             h.rope_high_freq_factor, h.rope_low_freq_factor));
    h.rope_original_ctx = r.optional_int(
        "original_max_position_embeddings",
        top.require_int("max_position_embeddings", 1, int64_t{1} << 30), 1, int64_t{1} << 30);
    h.rope_freqs =
        llama3_rope_divisors(c.n_rot, c.rope_freq_base, h.rope_llama3_factor,
                             h.rope_low_freq_factor, h.rope_high_freq_factor, h.rope_original_ctx);
  } else if (type == "yarn") {
    // transformers' _compute_yarn_parameters: factor defaults to max_position_embeddings /
    // original_max_position_embeddings; attention_factor to get_mscale(factor, mscale) /
    // get_mscale(factor, mscale_all_dim) when both are given, else 1 + 0.1 ln(factor).
    YarnParams y;
    const int64_t max_pos = top.require_int("max_position_embeddings", 1, int64_t{1} << 30);
    y.n_ctx_orig = r.optional_int("original_max_position_embeddings", max_pos, 1, int64_t{1} << 30);
    y.factor = r.number("factor", static_cast<double>(max_pos) / static_cast<double>(y.n_ctx_orig),
                        1.0, 1e6, false);
    y.beta_fast = r.number("beta_fast", 32.0, 0.0, 1e6, true);
    y.beta_slow = r.number("beta_slow", 1.0, 0.0, 1e6, true);
    y.truncate = r.boolean("truncate", true);
    const double mscale = r.number("mscale", 0.0, 0.0, 1e6, false);
    const double mscale_all = r.number("mscale_all_dim", 0.0, 0.0, 1e6, false);
    auto get_mscale = [&](double m) {
      return y.factor <= 1.0 ? 1.0 : 0.1 * m * std::log(y.factor) + 1.0;
    };
    const double derived = mscale > 0.0 && mscale_all > 0.0
                               ? get_mscale(mscale) / get_mscale(mscale_all)
                               : get_mscale(1.0);
    y.attn_factor = r.number("attention_factor", derived, 0.0, 1e6, true);
    set_rope_yarn(c, y);
  } else if (type == "longrope" || type == "su") {
    // transformers' _compute_longrope_parameters (Phi3Config renames "su" to "longrope"):
    // factor defaults to max_position_embeddings / original_max_position_embeddings, the
    // attention factor to sqrt(1 + ln(factor) / ln(original)) above 1.
    const int64_t max_pos = top.require_int("max_position_embeddings", 1, int64_t{1} << 30);
    const int64_t orig = r.optional_int(
        "original_max_position_embeddings",
        top.optional_int("original_max_position_embeddings", max_pos, 1, int64_t{1} << 30), 1,
        int64_t{1} << 30);
    const double factor = r.number(
        "factor", static_cast<double>(max_pos) / static_cast<double>(orig), 0.0, 1e6, true);
    const double derived =
        factor > 1.0 ? std::sqrt(1.0 + std::log(factor) / std::log(static_cast<double>(orig)))
                     : 1.0;
    c.rope_scaling_type = "longrope";
    c.rope_longrope_orig_ctx = orig;
    c.rope_mscale = r.number("attention_factor", derived, 0.0, 1e6, true);
    h.rope_long_factor = r.divisors("long_factor", c.n_rot / 2);
    h.rope_short_factor = r.divisors("short_factor", c.n_rot / 2);
  } else {
    r.fail(r.get("rope_type") != nullptr ? "rope_type" : "type",
           fmt::format("'{}' is not supported (supported: default, linear, llama3, yarn, longrope)",
                       type));
  }
}

}  // namespace

std::vector<float> llama3_rope_divisors(int64_t n_rot, double freq_base, double factor,
                                        double low_freq_factor, double high_freq_factor,
                                        int64_t original_ctx) {
  // transformers' _compute_llama3_parameters, per pair i:
  //   inv_freq = base^(-2i / n_rot), wavelen = 2 pi / inv_freq
  //   wavelen < ctx / high_freq_factor: inv_freq unchanged                 (divisor 1)
  //   wavelen > ctx / low_freq_factor:  inv_freq / factor                  (divisor factor)
  //   otherwise: smooth = (ctx / wavelen - low) / (high - low),
  //              inv_freq * ((1 - smooth) / factor + smooth)    (divisor 1 / that)
  // transformers computes in float32 and llama.cpp's converter in double; the divisors agree
  // to float rounding.
  const double ctx = static_cast<double>(original_ctx);
  const double low_wavelen = ctx / low_freq_factor;
  const double high_wavelen = ctx / high_freq_factor;
  std::vector<float> out(static_cast<size_t>(n_rot / 2));
  for (int64_t i = 0; i < n_rot / 2; ++i) {
    const double inv_freq =
        std::pow(freq_base, -2.0 * static_cast<double>(i) / static_cast<double>(n_rot));
    const double wavelen = 2.0 * kPi / inv_freq;
    double divisor = 1.0;
    if (wavelen > low_wavelen) {
      divisor = factor;
    } else if (wavelen >= high_wavelen) {
      const double smooth =
          (ctx / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
      divisor = 1.0 / ((1.0 - smooth) / factor + smooth);
    }
    out[static_cast<size_t>(i)] = static_cast<float>(divisor);
  }
  return out;
}

namespace {

json parse_config(const std::string& text, const std::string& path) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    throw FileError(path, fmt::format("not valid JSON: {}", json_error_text(e.what())),
                    e.byte > 0 ? e.byte - 1 : 0);
  } catch (const json::exception& e) {
    // out_of_range 406: a number like 1e400 that overflows a double (found by fuzz_hf_config).
    throw FileError(path, fmt::format("not usable JSON: {}", json_error_text(e.what())));
  }
  if (!j.is_object()) throw FileError(path, "expected a JSON object");
  return j;
}

std::string read_config_text(const std::string& path) {
  const MappedFile m(path);
  if (m.size() > kMaxConfigBytes)
    throw FileError(path, fmt::format("{} bytes is more than a config.json may have ({})", m.size(),
                                      kMaxConfigBytes));
  return std::string(reinterpret_cast<const char*>(m.data()), m.size());
}

// read_hf_shape's numbers from the object `k` holds the model's keys in.
ModelShape shape_from_keys(const Keys& k) {
  ModelShape s;
  s.arch = k.string("model_type", "");
  s.n_vocab = k.require_int("vocab_size", 1, kMaxDim);
  s.n_embd = k.require_int("hidden_size", 1, kMaxDim);
  s.n_layers = k.require_int("num_hidden_layers", 1, 4096);
  s.n_heads = k.require_int("num_attention_heads", 1, 4096);
  s.n_kv_heads = k.optional_int("num_key_value_heads", s.n_heads, 1, 4096);
  // Mixtral names the expert count num_local_experts and its expert size intermediate_size.
  s.n_experts = k.optional_int(
      "num_local_experts",
      k.optional_int("num_experts", k.optional_int("n_routed_experts", 0, 0, kMaxDim), 0, kMaxDim),
      0, kMaxDim);
  if (s.n_experts > 0) {
    s.n_experts_used = k.require_int("num_experts_per_tok", 1, kMaxDim);
    s.n_shared_experts = k.optional_int("n_shared_experts", 0, 0, kMaxDim);
    s.n_dense_layers = k.optional_int("first_k_dense_replace", 0, 0, s.n_layers);
    s.n_ff_expert = k.optional_int("moe_intermediate_size", 0, 0, kMaxDim);
    if (s.n_ff_expert == 0) s.n_ff_expert = k.require_int("intermediate_size", 1, kMaxDim);
    // Qwen2-MoE: one gated shared expert of its own size
    s.n_ff_shared = k.optional_int("shared_expert_intermediate_size", 0, 0, kMaxDim);
    s.n_ff = s.n_dense_layers > 0 ? k.require_int("intermediate_size", 1, kMaxDim)
                                  : k.optional_int("intermediate_size", 0, 0, kMaxDim);
  } else {
    s.n_ff = k.require_int("intermediate_size", 1, kMaxDim);
  }
  s.n_ctx_train = k.optional_int("max_position_embeddings", 0, 1, int64_t{1} << 30);
  if (s.n_heads % s.n_kv_heads != 0)
    k.fail("num_key_value_heads",
           fmt::format("= {} does not divide num_attention_heads = {}", s.n_kv_heads, s.n_heads));
  s.kv_lora_rank = k.optional_int("kv_lora_rank", 0, 0, kMaxDim);
  if (s.kv_lora_rank > 0) {  // MLA: the head sizes are given apart
    s.q_lora_rank = k.optional_int("q_lora_rank", 0, 0, kMaxDim);
    s.n_rot = k.require_int("qk_rope_head_dim", 1, 65536);
    s.head_dim = k.require_int("qk_nope_head_dim", 1, 65536) + s.n_rot;
    s.v_head_dim = k.require_int("v_head_dim", 1, 65536);
    s.n_rot_given = true;
  } else {
    if (k.get("head_dim") != nullptr) {
      s.head_dim = k.require_int("head_dim", 1, 65536);
    } else {
      if (s.n_embd % s.n_heads != 0)
        k.fail("num_attention_heads",
               fmt::format("= {} does not divide hidden_size = {}", s.n_heads, s.n_embd));
      s.head_dim = s.n_embd / s.n_heads;
    }
    s.v_head_dim = s.head_dim;
    s.n_rot = s.head_dim;
  }
  if (k.get("tie_word_embeddings") != nullptr)
    s.tie_word_embeddings = k.boolean("tie_word_embeddings", false);
  s.attention_bias = k.boolean("attention_bias", false);
  if (k.get("use_sliding_window") != nullptr)
    s.use_sliding_window = k.boolean("use_sliding_window", true);
  if (k.get("sliding_window") != nullptr)
    s.sliding_window = k.require_int("sliding_window", 0, int64_t{1} << 30);
  if (const json* types = k.get("layer_types"); types != nullptr && types->is_array()) {
    s.sliding_window_period = 0;
    for (size_t i = 0; i < types->size(); ++i)
      if ((*types)[i] == "full_attention") {
        s.sliding_window_period = static_cast<int64_t>(i) + 1;
        break;
      }
  }
  return s;
}

}  // namespace

ModelShape read_hf_shape(const std::string& path) {
  const json root = parse_config(read_config_text(path), path);
  const auto text = root.find("text_config");
  const bool nested = !root.contains("hidden_size") && text != root.end() && text->is_object();
  ModelShape s = shape_from_keys(Keys(nested ? *text : root, path, nested ? "text_config." : ""));
  s.name = Keys(root, path).string("_name_or_path", "");
  return s;
}

HfConfig hf_config_from_json(const std::string& text, const std::string& path,
                             const ArchTable& table) {
  const json j = parse_config(text, path);
  const Keys k(j, path);
  HfConfig h;
  const json* archs = k.get("architectures");
  if (archs == nullptr || !archs->is_array() || archs->empty() || !(*archs)[0].is_string())
    k.fail("architectures", fmt::format("is missing or not a list of names (supported: {})",
                                        arch_hf_classes(table)));
  h.architecture = (*archs)[0].get<std::string>();
  const ArchRow* row = find_arch_by_hf(h.architecture, table);
  if (row == nullptr)
    throw FileError(path, fmt::format("architecture '{}' is not supported (supported: {})",
                                      h.architecture, arch_hf_classes(table)));

  ModelConfig& c = h.config;
  c.rope_type = RopeType::Neox;  // rotate_half: see hf_config.h
  const ModelShape s = shape_from_keys(k);
  // What the shape allows and the engine does not compute (yet).
  if (s.n_ff == 0) (void)k.require_int("intermediate_size", 1, kMaxDim);
  if (s.n_ctx_train == 0) (void)k.require_int("max_position_embeddings", 1, int64_t{1} << 30);
  if (s.kv_lora_rank > 0) k.fail("kv_lora_rank", "> 0 is not supported (latent attention)");
  if (s.n_experts > 0)
    throw FileError(path,
                    fmt::format("{} experts: llmctl reads mixture-of-experts models from GGUF "
                                "only (convert with llama.cpp's convert_hf_to_gguf.py)",
                                s.n_experts));
  apply_shape(s, c);
  apply_architecture(h, *row, k);
  c.rms_eps = static_cast<float>(k.number("rms_norm_eps", 1e-6, 0.0, 1.0, true));
  if (!(c.rms_eps > 0.0f)) k.fail("rms_norm_eps", "rounds to 0 as a float");
  // Gemma's configs name the activation hidden_activation (and may carry an older hidden_act
  // beside it, which transformers ignores).
  const char* act_key = k.get("hidden_activation") != nullptr ? "hidden_activation" : "hidden_act";
  const char* want_act = hf_activation_name(row->activation);
  const std::string act = k.string(act_key, want_act);
  if (act != want_act)
    k.fail(act_key, fmt::format("'{}' is not supported (supported: {})", act, want_act));
  h.tie_word_embeddings = k.boolean("tie_word_embeddings", row->hf_tied_default);
  apply_rope(h, *row, j, k, path);

  h.bos_token_id = k.token_id("bos_token_id");
  h.eos_token_id = k.token_id("eos_token_id");
  h.torch_dtype = k.string("torch_dtype", k.string("dtype", ""));

  apply_arch_row(*row, c);
  if (h.rope_local_base > 0.0) c.window.local_rope_base = h.rope_local_base;
  apply_row_values(c, *row, k);
  const std::string missing = unimplemented_message(c);
  if (!missing.empty()) throw FileError(path, missing);
  return h;
}

HfConfig read_hf_config(const std::string& path) {
  return hf_config_from_json(read_config_text(path), path);
}

}  // namespace llmctl
