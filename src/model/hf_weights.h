#pragma once
// ModelWeights bound to the tensors of a Hugging Face safetensors checkpoint, in place.
//
// Names and shapes (safetensors/torch order (out, in); ggml order is the reverse): the
// per-layer tensors are kLayerTensors' `hf` names under model.layers.N. (arch.h), e.g.
//   model.layers.N.self_attn.q_proj.weight          (n_heads * head_dim, n_embd)   (+ .bias, qwen2)
//   model.layers.N.mlp.down_proj.weight             (n_embd, n_ff)
// and around them
//   model.embed_tokens.weight                       (n_vocab, n_embd)
//   model.norm.weight                               (n_embd,)
//   lm_head.weight                                  (n_vocab, n_embd), absent when tied
// A torch Linear weight (out, in), row-major, is ggml's [in, out]: exactly the layout a
// WeightView expects, so matrices are viewed where they lie in the mapping, in any of F32,
// F16 and BF16. Q and K rows stay in Hugging Face order: the config's rope_type is Neox
// (hf_config.h), which pairs dims the way these rows are laid out.
//
// Copies are made only where the engine needs another form: norm and bias vectors (tiny) in
// F16/BF16 become F32, Gemma's norm weights w (ArchRow::hf_norm_offset) become 1 + w as in
// its GGUF files, the llama3 rope divisors come from config.json, and a tensor whose data is
// not aligned to its element size (legal in safetensors) is copied to F32.

#include <deque>
#include <vector>

#include "io/safetensors.h"
#include "model/hf_config.h"
#include "model/weights.h"

namespace llmctl {

// Arrays made at load time. A deque never moves its elements, and moving the deque keeps
// them in place, so views into it stay valid while it lives.
struct OwnedArrays {
  std::deque<std::vector<float>> f32;
  const float* add(std::vector<float> v) {
    f32.push_back(std::move(v));
    return f32.back().data();
  }
};

// Binds every tensor `hf` calls for. Throws FileError naming the shard and the tensor with
// expected vs actual shape or dtype, e.g.
//   "model.safetensors: tensor 'model.layers.1.self_attn.k_proj.weight': expected [32, 64],
//    got [64, 64]".
// `checkpoint` and `owned` must outlive the views.
ModelWeights bind_hf_weights(const SafetensorsCheckpoint& checkpoint, const HfConfig& hf,
                             OwnedArrays& owned);

}  // namespace llmctl
