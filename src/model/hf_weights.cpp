// Weight binding for Hugging Face checkpoints (hf_weights.h): find each tensor, check its
// dtype and shape against config.json, view it in place or make the F32 copy the engine needs.
#include "model/hf_weights.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/fp16.h"

namespace llmctl {

namespace {

std::string shape_str(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

size_t elem_size(GgmlType t) { return t == GgmlType::F32 ? 4 : 2; }

// The tensor's elements widened to float.
std::vector<float> to_f32(const SafetensorsTensor& t) {
  std::vector<float> out(static_cast<size_t>(t.n_elements()));
  for (size_t i = 0; i < out.size(); ++i) {
    if (t.type == GgmlType::F32) {
      std::memcpy(&out[i], t.data + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, t.data + 2 * i, 2);
      out[i] = t.type == GgmlType::F16 ? fp16_to_f32(h) : bf16_to_f32(h);
    }
  }
  return out;
}

class Binder {
 public:
  // `norm_offset`: the checkpoint's norm weights are offsets from 1 (ArchRow::hf_norm_offset).
  Binder(const SafetensorsCheckpoint& ckpt, OwnedArrays& owned, bool norm_offset)
      : ckpt_(ckpt), owned_(owned), norm_offset_(norm_offset) {}

  // The view of tensor `name`, checked to have file shape `expected` ((out, in) or (n,)):
  // a Matrix in place (F32/F16/BF16), a Vector or Norm as F32 for the engine (a Norm of a
  // norm_offset checkpoint as the copy 1 + w, what the engine and GGUF files multiply by).
  // An absent view when the tensor is missing and `optional`.
  WeightView bind(const std::string& name, TensorKind kind, const std::vector<int64_t>& expected,
                  bool optional = false) {
    const std::string& path = ckpt_.path_of(name);
    const SafetensorsTensor* t = ckpt_.find(name);
    if (t == nullptr) {
      if (optional) return WeightView{name, GgmlType::F32, 0, 0, nullptr};
      throw FileError(path,
                      fmt::format("missing tensor '{}' (expected {})", name, shape_str(expected)));
    }
    if (t->shape != expected)
      throw FileError(path, fmt::format("tensor '{}': expected {}, got {}", name,
                                        shape_str(expected), shape_str(t->shape)));
    WeightView v;
    v.name = name;
    v.type = t->type;
    v.n_cols = expected.back();                             // ggml shape[0]: the row length
    v.n_rows = expected.size() > 1 ? expected.front() : 1;  // ggml shape[1]
    v.data = t->data;
    const bool aligned = reinterpret_cast<uintptr_t>(t->data) % elem_size(t->type) == 0;
    const bool offset = kind == TensorKind::Norm && norm_offset_;
    if ((kind != TensorKind::Matrix && t->type != GgmlType::F32) || !aligned || offset) {
      std::vector<float> values = to_f32(*t);
      if (offset)
        for (float& x : values) x += 1.0f;
      v.type = GgmlType::F32;
      v.data = owned_.add(std::move(values));
    }
    return v;
  }

 private:
  const SafetensorsCheckpoint& ckpt_;
  OwnedArrays& owned_;
  bool norm_offset_;
};

}  // namespace

ModelWeights bind_hf_weights(const SafetensorsCheckpoint& ckpt, const HfConfig& hf,
                             OwnedArrays& owned) {
  const ModelConfig& c = hf.config;
  const int64_t n_embd = c.n_embd;
  const ArchRow* row = find_arch_by_gguf(c.arch);
  LLMCTL_ASSERT(row != nullptr);  // the HF reader found the row
  Binder b(ckpt, owned, row->hf_norm_offset);
  ModelWeights w;
  w.token_embd = b.bind("model.embed_tokens.weight", TensorKind::Matrix, {c.n_vocab, n_embd});
  w.output_norm = b.bind("model.norm.weight", TensorKind::Norm, {n_embd});
  if (hf.tie_word_embeddings) {  // the output projection reuses the embeddings (an lm_head
    w.output = w.token_embd;     // tensor, when a checkpoint carries one, is a copy of them)
    w.output_tied = true;
  } else {
    w.output = b.bind("lm_head.weight", TensorKind::Matrix, {c.n_vocab, n_embd});
  }
  if (!hf.rope_freqs.empty()) {
    LLMCTL_ASSERT(static_cast<int64_t>(hf.rope_freqs.size()) == c.n_rot / 2);
    w.rope_freqs = WeightView{"rope_freqs (config.json rope llama3)", GgmlType::F32, c.n_rot / 2, 1,
                              owned.add(hf.rope_freqs)};
  }
  if (!hf.rope_long_factor.empty()) {
    w.rope_factors_long = WeightView{"rope_factors_long (config.json rope longrope)", GgmlType::F32,
                                     c.n_rot / 2, 1, owned.add(hf.rope_long_factor)};
    w.rope_factors_short =
        WeightView{"rope_factors_short (config.json rope longrope)", GgmlType::F32, c.n_rot / 2, 1,
                   owned.add(hf.rope_short_factor)};
  }
  w.layers.resize(static_cast<size_t>(c.n_layers));
  for (int64_t il = 0; il < c.n_layers; ++il) {
    LayerWeights& l = w.layers[static_cast<size_t>(il)];
    for (const LayerTensor& t : kLayerTensors) {
      if (!layer_tensor_present(t, c)) continue;
      std::vector<int64_t> shape = layer_tensor_shape(t, c);  // ggml order: reversed in the file
      std::reverse(shape.begin(), shape.end());
      l.*t.member = b.bind(hf_tensor_name(t, il, c), t.kind, shape);
    }
  }
  return w;
}

}  // namespace llmctl
