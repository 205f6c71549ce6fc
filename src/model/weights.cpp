// Weight binding (weights.h): find each tensor, check its dtype and shape against the config,
// keep a view into the mapping. The per-layer tensors come from kLayerTensors (arch.h).
#include "model/weights.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <map>

#include "core/error.h"
#include "io/gguf.h"

namespace llmctl {

namespace {

std::string shape_str(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

// The view of tensor `name`, checked to have ggml shape `expected` (Matrix: any supported
// weight type; Vector and Norm: F32 only). Returns an absent view when the tensor is missing and
// `optional`.
WeightView bind_tensor(const GgufFile& f, const std::string& name, TensorKind kind,
                       const std::vector<int64_t>& expected, bool optional = false) {
  const GgufTensorInfo* t = f.find_tensor(name);
  if (t == nullptr) {
    if (optional) return WeightView{name, GgmlType::F32, 0, 0, nullptr};
    throw FileError(f.path(),
                    fmt::format("missing tensor '{}' (expected {})", name, shape_str(expected)));
  }
  // A trailing dimension of 1 is the same tensor (some writers store vectors as [n, 1]).
  std::vector<int64_t> shape = t->shape;
  while (shape.size() > expected.size() && shape.back() == 1) shape.pop_back();
  if (shape != expected)
    throw FileError(f.path(), fmt::format("tensor '{}': expected {}, got {}", name,
                                          shape_str(expected), shape_str(t->shape)));
  if (kind != TensorKind::Matrix && t->type != GgmlType::F32)
    throw FileError(
        f.path(), fmt::format("tensor '{}': expected F32 {}, got {} {}", name, shape_str(expected),
                              ggml_type_name(t->type), shape_str(t->shape)));
  if (kind == TensorKind::Matrix) {
    if (!backend_supports_weight_type(t->type))
      throw FileError(f.path(), fmt::format("tensor '{}': type {} is not supported (supported: "
                                            "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, "
                                            "Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4)",
                                            name, ggml_type_name(t->type)));
    const uint32_t block = ggml_traits(t->type).block_size;
    if (expected[0] % block != 0)
      throw FileError(f.path(), fmt::format("tensor '{}': rows of {} elements are not whole {} "
                                            "blocks of {}",
                                            name, expected[0], ggml_type_name(t->type), block));
  }
  if (t->data == nullptr) throw FileError(f.path(), fmt::format("tensor '{}' has no data", name));
  WeightView v;
  v.name = name;
  v.type = t->type;
  v.n_cols = expected[0];
  // A 3-D tensor [cols, rows, n] (one matrix per expert) is n * rows whole rows in a row.
  v.n_rows = 1;
  for (size_t d = 1; d < expected.size(); ++d) v.n_rows *= expected[d];
  v.data = t->data;
  return v;
}

}  // namespace

ModelWeights bind_weights(const GgufFile& f, const ModelConfig& c) {
  const int64_t n_embd = c.n_embd;
  ModelWeights w;
  w.token_embd = bind_tensor(f, "token_embd.weight", TensorKind::Matrix, {n_embd, c.n_vocab});
  w.output_norm = bind_tensor(f, "output_norm.weight", TensorKind::Norm, {n_embd});
  w.output =
      bind_tensor(f, "output.weight", TensorKind::Matrix, {n_embd, c.n_vocab}, /*optional=*/true);
  if (!w.output.present()) {  // tied embeddings: the output projection reuses token_embd
    w.output = w.token_embd;
    w.output_tied = true;
  }
  // Per-pair frequency divisors (n_rot / 2,), F32: Llama 3.1 rope scaling, LongRoPE's two.
  auto divisors = [&](const char* name) {
    const WeightView d = bind_tensor(f, name, TensorKind::Vector, {c.n_rot / 2}, /*optional=*/true);
    for (int64_t i = 0; d.present() && i < c.n_rot / 2; ++i) {
      float v;
      std::memcpy(&v, static_cast<const uint8_t*>(d.data) + 4 * i, 4);
      if (!(v > 0.0f && std::isfinite(v)))  // a divisor of the angle: 0 or NaN gives NaN logits
        throw FileError(f.path(), fmt::format("tensor '{}': element {} is {}, expected a "
                                              "positive finite divisor",
                                              name, i, static_cast<double>(v)));
    }
    return d;
  };
  w.rope_freqs = divisors("rope_freqs.weight");
  if (c.rope_longrope_orig_ctx > 0) {
    w.rope_factors_long = divisors("rope_factors_long.weight");
    w.rope_factors_short = divisors("rope_factors_short.weight");
  }
  if (c.n_experts > 0)
    w.expert_share = static_cast<double>(c.n_experts_used) / static_cast<double>(c.n_experts);
  w.layers.resize(static_cast<size_t>(c.n_layers));
  for (int64_t il = 0; il < c.n_layers; ++il) {
    LayerWeights& l = w.layers[static_cast<size_t>(il)];
    for (const LayerTensor& t : kLayerTensors)
      if (layer_tensor_present(t, c))
        l.*t.member = bind_tensor(f, gguf_tensor_name(t, il, c), t.kind, layer_tensor_shape(t, c));
  }
  return w;
}

const WeightView& rope_divisors_for(const ModelWeights& w, const ModelConfig& c, int64_t n_ctx) {
  if (w.rope_freqs.present() || c.rope_longrope_orig_ctx == 0) return w.rope_freqs;
  return n_ctx > c.rope_longrope_orig_ctx ? w.rope_factors_long : w.rope_factors_short;
}

WeightStats weight_stats(const ModelWeights& w) {
  WeightStats st;
  std::map<GgmlType, uint64_t> by_type;
  const auto bytes_of = [](const WeightView& v) -> uint64_t {
    return v.present() ? weight_row_bytes(v.type, v.n_cols) * static_cast<uint64_t>(v.n_rows) : 0;
  };
  const auto elems = [](const WeightView& v) -> uint64_t {
    return v.present() ? static_cast<uint64_t>(v.n_cols) * static_cast<uint64_t>(v.n_rows) : 0;
  };
  const auto count = [&](const WeightView& v, bool read_per_token) {
    st.bytes += bytes_of(v);
    st.params += elems(v);
    if (read_per_token) st.bytes_per_token += bytes_of(v);
  };
  count(w.token_embd, false);
  if (w.token_embd.present())
    st.bytes_per_token += weight_row_bytes(w.token_embd.type, w.token_embd.n_cols);
  count(w.output_norm, true);
  count(w.rope_freqs, true);
  count(w.rope_factors_long, true);
  count(w.rope_factors_short, true);
  if (w.output_tied)
    st.bytes_per_token += bytes_of(w.output);
  else
    count(w.output, true);
  st.output_params = elems(w.output);
  for (const LayerWeights& l : w.layers) {
    for (const LayerTensor& t : kLayerTensors) {  // absent views count 0
      const WeightView& v = l.*t.member;
      // A token reads the rows of its chosen experts only.
      const double share = t.experts != Dim::One ? w.expert_share : 1.0;
      const auto part = [share](uint64_t n) {
        return static_cast<uint64_t>(std::llround(static_cast<double>(n) * share));
      };
      count(v, false);
      st.bytes_per_token += part(bytes_of(v));
      if (t.kind == TensorKind::Matrix) {
        st.matmul_params += part(elems(v));
        by_type[v.type] += bytes_of(v);
      }
    }
  }
  uint64_t most = 0;
  for (const auto& [type, b] : by_type)
    if (b > most) {
      most = b;
      st.main_type = type;
    }
  return st;
}

}  // namespace llmctl
