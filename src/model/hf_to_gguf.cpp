// hf_to_gguf (hf_to_gguf.h): metadata, then every weight re-encoded (and, for Q/K of a row
// with hf_qk_permute, row-permuted) into a GgufBuilder. Layer tensors: kLayerTensors (arch.h).
#include "model/hf_to_gguf.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/fp16.h"

namespace llmctl {

namespace {

namespace gv = gguf_value;

float read_elem(const WeightView& v, size_t i) {
  const auto* p = static_cast<const uint8_t*>(v.data);
  if (v.type == GgmlType::F32) {
    float f;
    std::memcpy(&f, p + 4 * i, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, p + 2 * i, 2);
  return v.type == GgmlType::F16 ? fp16_to_f32(h) : bf16_to_f32(h);
}

void write_elem(std::vector<uint8_t>& out, size_t i, GgmlType type, float f) {
  if (type == GgmlType::F32) {
    std::memcpy(out.data() + 4 * i, &f, 4);
    return;
  }
  const uint16_t h = type == GgmlType::F16 ? f32_to_fp16(f) : f32_to_bf16(f);
  std::memcpy(out.data() + 2 * i, &h, 2);
}

// Row r of the result is row source_row(r) of `v`: identity, or the NEOX -> NORMAL
// permutation within heads of `head_dim` rows (hf_to_gguf.h).
int64_t source_row(int64_t r, int64_t head_dim) {
  if (head_dim == 0) return r;
  const int64_t head = r / head_dim, i = r % head_dim;
  const int64_t j = i / 2, half = i % 2;
  return head * head_dim + half * (head_dim / 2) + j;
}

class Writer {
 public:
  Writer(GgufBuilder& b, GgmlType matrix_type) : b_(b), matrix_type_(matrix_type) {}

  // Adds `v` as `name`, matrices in the output type, vectors in F32; rows (a vector's
  // elements) permuted per head when permute_head_dim > 0. ggml shape [n_cols, n_rows] (or
  // [n_cols] for a vector).
  void add(const std::string& name, const WeightView& v, bool vector,
           int64_t permute_head_dim = 0) {
    const GgmlType type = vector ? GgmlType::F32 : matrix_type_;
    const size_t esize = type == GgmlType::F32 ? 4 : 2;
    // What the permutation moves: rows of a matrix, elements of a vector.
    const int64_t n_units = vector ? v.n_cols : v.n_rows;
    const auto unit = static_cast<size_t>(vector ? 1 : v.n_cols);
    std::vector<uint8_t> bytes(static_cast<size_t>(n_units) * unit * esize);
    for (int64_t r = 0; r < n_units; ++r) {
      const auto src = static_cast<size_t>(source_row(r, permute_head_dim)) * unit;
      const size_t dst = static_cast<size_t>(r) * unit;
      for (size_t c = 0; c < unit; ++c) write_elem(bytes, dst + c, type, read_elem(v, src + c));
    }
    std::vector<int64_t> shape{v.n_cols};
    if (!vector) shape.push_back(v.n_rows);
    b_.add_tensor(name, type, std::move(shape), std::move(bytes));
  }

 private:
  GgufBuilder& b_;
  GgmlType matrix_type_;
};

uint32_t u32(int64_t v) { return static_cast<uint32_t>(v); }  // config values are range-checked

void add_vocab(GgufBuilder& b, const GgufVocab& vocab, const LoadedModel& m) {
  const size_t n = static_cast<size_t>(m.config.n_vocab);
  if (vocab.tokens.size() > n || vocab.scores.size() != vocab.tokens.size() ||
      vocab.types.size() != vocab.tokens.size())
    throw Error(
        fmt::format("hf_to_gguf: vocabulary of {} tokens ({} scores, {} types) does not "
                    "fit the model's {} ids",
                    vocab.tokens.size(), vocab.scores.size(), vocab.types.size(), n));
  std::vector<std::string> tokens = vocab.tokens;
  std::vector<float> scores = vocab.scores;
  std::vector<int32_t> types = vocab.types;
  for (size_t i = tokens.size(); i < n; ++i) {  // as convert_hf_to_gguf pads a vocabulary
    tokens.push_back(fmt::format("[PAD{}]", i));
    scores.push_back(-1000.0f);
    types.push_back(5);  // UNUSED
  }
  b.set("tokenizer.ggml.model", gv::string("llama"));
  b.set("tokenizer.ggml.tokens", gv::string_array(tokens));
  b.set("tokenizer.ggml.scores", gv::f32_array(scores));
  b.set("tokenizer.ggml.token_type", gv::i32_array(types));
  if (m.hf.bos_token_id >= 0 && static_cast<size_t>(m.hf.bos_token_id) < n)
    b.set("tokenizer.ggml.bos_token_id", gv::u32(u32(m.hf.bos_token_id)));
  if (m.hf.eos_token_id >= 0 && static_cast<size_t>(m.hf.eos_token_id) < n)
    b.set("tokenizer.ggml.eos_token_id", gv::u32(u32(m.hf.eos_token_id)));
  for (size_t i = 0; i < n; ++i)
    if (types[i] == 2) {  // UNKNOWN
      b.set("tokenizer.ggml.unknown_token_id", gv::u32(static_cast<uint32_t>(i)));
      break;
    }
  b.set("tokenizer.ggml.add_space_prefix", gv::boolean(vocab.add_space_prefix));
  b.set("tokenizer.ggml.remove_extra_whitespaces", gv::boolean(vocab.remove_extra_whitespaces));
}

// The keys config_from_gguf reads for the row's switches (config.cpp read_window,
// read_caps_and_scales), as the converter writes them. An attention scale GGUF cannot carry
// (a row without file_scales gets llama.cpp's rule from the layer count) is refused.
void add_row_values(GgufBuilder& b, const std::string& a, const ArchRow& row,
                    const ModelConfig& c) {
  if (c.window.layers != WindowLayers::None && c.sliding_window > 0) {
    b.set(a + "attention.sliding_window", gv::u32(u32(c.sliding_window)));
    if (c.window.local_rope_base > 0.0)
      b.set(a + "rope.freq_base_swa", gv::f32(static_cast<float>(c.window.local_rope_base)));
    if (c.window.period != row.window.period)
      b.set(a + "attention.sliding_window_pattern", gv::u32(u32(c.window.period)));
  }
  if (row.attn_softcap > 0.0 && c.attn_softcap > 0.0)
    b.set(a + "attn_logit_softcapping", gv::f32(static_cast<float>(c.attn_softcap)));
  if (c.final_softcap > 0.0)
    b.set(a + "final_logit_softcapping", gv::f32(static_cast<float>(c.final_softcap)));
  if (row.file_scales) {
    b.set(a + "embedding_scale", gv::f32(static_cast<float>(c.embd_scale)));
    b.set(a + "residual_scale", gv::f32(static_cast<float>(c.residual_scale)));
    b.set(a + "attention.scale", gv::f32(static_cast<float>(c.attn_scale)));
    b.set(a + "logit_scale", gv::f32(static_cast<float>(c.logit_scale)));
    return;
  }
  ModelConfig from_rule = c;  // what a GGUF reader derives
  from_rule.attn_scale = 0.0;
  apply_arch_row(row, from_rule);
  const auto effective = [&](double s) {
    return s > 0.0 ? s : 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  };
  if (std::abs(effective(c.attn_scale) - effective(from_rule.attn_scale)) >
      1e-6 * effective(c.attn_scale))
    throw Error(
        fmt::format("hf_to_gguf: arch {} with attention scale {} (config.json), which a "
                    "GGUF file cannot carry: its readers use {}",
                    c.arch, effective(c.attn_scale), effective(from_rule.attn_scale)));
}

}  // namespace

GgufBuilder hf_to_gguf(const LoadedModel& m, const HfToGgufOptions& opt) {
  const ModelConfig& c = m.config;
  if (m.format != "hf")
    throw Error(
        fmt::format("hf_to_gguf: '{}' is a {} model, expected one loaded from a Hugging "
                    "Face directory",
                    m.path, m.format));
  if (opt.type != GgmlType::F32 && opt.type != GgmlType::F16 && opt.type != GgmlType::BF16)
    throw Error(
        fmt::format("hf_to_gguf: output type {} is not supported (supported: F32, F16, "
                    "BF16; quantize the GGUF afterwards)",
                    ggml_type_name(opt.type)));
  const ArchRow* row = find_arch_by_gguf(c.arch);
  LLMCTL_ASSERT(row != nullptr);  // the HF reader found the row
  const bool permute = row->hf_qk_permute;
  if (permute && c.n_rot != c.head_dim)
    throw Error(
        fmt::format("hf_to_gguf: arch {} with {} rotary dims of {} (partial rotary) "
                    "cannot be written with the NORMAL rope pairing",
                    c.arch, c.n_rot, c.head_dim));
  if (permute && c.fused_qkv)
    throw Error(
        fmt::format("hf_to_gguf: arch {} has a fused QKV projection, whose Q and K rows "
                    "this writer cannot permute",
                    c.arch));

  GgufBuilder b;
  const std::string a = c.arch + ".";
  const std::filesystem::path dir = std::filesystem::path(m.path).lexically_normal();
  const std::string name = !opt.name.empty()        ? opt.name
                           : dir.filename().empty() ? dir.parent_path().filename().string()
                                                    : dir.filename().string();
  b.set("general.architecture", gv::string(c.arch));
  b.set("general.name", gv::string(name));
  b.set("general.file_type", gv::u32(opt.type == GgmlType::F32   ? 0u      // ALL_F32
                                     : opt.type == GgmlType::F16 ? 1u      // MOSTLY_F16
                                                                 : 32u));  // MOSTLY_BF16
  b.set(a + "vocab_size", gv::u32(u32(c.n_vocab)));
  b.set(a + "context_length", gv::u32(u32(c.n_ctx_train)));
  b.set(a + "embedding_length", gv::u32(u32(c.n_embd)));
  b.set(a + "block_count", gv::u32(u32(c.n_layers)));
  b.set(a + "feed_forward_length", gv::u32(u32(c.n_ff)));
  b.set(a + "attention.head_count", gv::u32(u32(c.n_heads)));
  b.set(a + "attention.head_count_kv", gv::u32(u32(c.n_kv_heads)));
  if (c.head_dim * c.n_heads != c.n_embd) {  // an explicit head_dim (as the converter does)
    b.set(a + "attention.key_length", gv::u32(u32(c.head_dim)));
    b.set(a + "attention.value_length", gv::u32(u32(c.head_dim)));
  }
  b.set(a + "rope.dimension_count", gv::u32(u32(c.n_rot)));
  b.set(a + "rope.freq_base", gv::f32(static_cast<float>(c.rope_freq_base)));
  b.set(a + "attention.layer_norm_rms_epsilon", gv::f32(c.rms_eps));
  if (c.rope_scaling_type == "linear" || c.rope_scaling_type == "yarn") {
    b.set(a + "rope.scaling.type", gv::string(c.rope_scaling_type));
    b.set(a + "rope.scaling.factor", gv::f32(static_cast<float>(c.rope_scaling_factor)));
  }
  add_row_values(b, a, *row, c);
  if (c.rope_scaling_type == "yarn") {
    // The keys from which llama.cpp (and config_from_gguf) derive the same angles and factor:
    // its cos/sin factor is (1 + 0.1 ln factor) * rope.scaling.attn_factor.
    const YarnParams& y = c.rope_yarn;
    if (!y.truncate) throw Error("hf_to_gguf: YaRN with truncate false has no GGUF representation");
    b.set(a + "rope.scaling.original_context_length", gv::u32(u32(y.n_ctx_orig)));
    b.set(a + "rope.scaling.yarn_beta_fast", gv::f32(static_cast<float>(y.beta_fast)));
    b.set(a + "rope.scaling.yarn_beta_slow", gv::f32(static_cast<float>(y.beta_slow)));
    const double yarn_mscale = y.factor > 1.0 ? 1.0 + 0.1 * std::log(y.factor) : 1.0;
    b.set(a + "rope.scaling.attn_factor", gv::f32(static_cast<float>(c.rope_mscale / yarn_mscale)));
  }
  if (c.attn_temp_beta != 0.0) {  // its length is read back as YaRN's original context
    const bool yarn = c.rope_scaling_type == "yarn";
    if (yarn && c.rope_yarn.n_ctx_orig != c.attn_temp_length)
      throw Error(
          fmt::format("hf_to_gguf: attention temperature length {} differs from YaRN's "
                      "original context {}, which a GGUF file cannot carry",
                      c.attn_temp_length, c.rope_yarn.n_ctx_orig));
    b.set(a + "attention.temperature_scale", gv::f32(static_cast<float>(c.attn_temp_beta)));
    if (!yarn)
      b.set(a + "rope.scaling.original_context_length", gv::u32(u32(c.attn_temp_length)));
  }
  if (c.rope_scaling_type == "longrope") {  // as convert_hf_to_gguf's Phi3MiniModel: no type
    b.set(a + "rope.scaling.original_context_length", gv::u32(u32(c.rope_longrope_orig_ctx)));
    b.set(a + "rope.scaling.attn_factor", gv::f32(static_cast<float>(c.rope_mscale)));
  }
  if (opt.vocab != nullptr) add_vocab(b, *opt.vocab, m);

  const ModelWeights& w = m.weights;
  Writer out(b, opt.type);
  out.add("token_embd.weight", w.token_embd, false);
  if (w.rope_freqs.present()) out.add("rope_freqs.weight", w.rope_freqs, true);
  if (w.rope_factors_long.present()) {
    out.add("rope_factors_long.weight", w.rope_factors_long, true);
    out.add("rope_factors_short.weight", w.rope_factors_short, true);
  }
  out.add("output_norm.weight", w.output_norm, true);
  if (!w.output_tied) out.add("output.weight", w.output, false);
  const int64_t qk_perm = permute ? c.head_dim : 0;
  for (size_t il = 0; il < w.layers.size(); ++il) {
    const LayerWeights& l = w.layers[il];
    for (const LayerTensor& t : kLayerTensors)
      if (layer_tensor_present(t, c))
        out.add(gguf_tensor_name(t, static_cast<int64_t>(il), c), l.*t.member,
                t.kind != TensorKind::Matrix, t.rotary_rows ? qk_perm : 0);
  }
  return b;
}

}  // namespace llmctl
