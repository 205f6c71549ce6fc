#pragma once
// A model loaded from a Hugging Face directory, written as a GGUF file that load_model (and
// llama.cpp) runs the same way: metadata keys and tensor names as llama.cpp's
// convert_hf_to_gguf.py writes them for the rows of kArchRows (arch.h; layer tensors by
// kLayerTensors).
//
// The one real transformation is RoPE's pairing. Hugging Face rotates dims (i, i + d/2) of a
// head ("rotate_half", NEOX); GGUF arch llama rotates (2i, 2i + 1) (NORMAL). So, like the
// converter, the rows of Q and K are permuted within each head for a row with hf_qk_permute
// (arch llama), as are the elements of every tensor marked rotary_rows:
//   new row 2j + h  <-  old row h * d/2 + j        (j < d/2, h in {0, 1}, d = head_dim)
// which makes NORMAL pairing on the new rows compute exactly what NEOX did on the old ones.
// A NEOX row (qwen2) keeps that pairing in GGUF: its rows (and q/k/v biases) are written
// unchanged.
// Llama 3.1 rope scaling becomes the tensor rope_freqs.weight (F32, n_rot / 2), linear
// scaling the keys {arch}.rope.scaling.type/factor.
//
// Used by `llmctl quantize DIR OUT` (convert, then quantize the GGUF) and the tests.

#include <cstdint>
#include <string>
#include <vector>

#include "io/gguf_writer.h"
#include "model/model_loader.h"

namespace llmctl {

// A sentencepiece vocabulary in GGUF's terms (tokenizer.ggml.*). model/ may not include
// tokenizer/, so the caller fills this, e.g. from parse_sp_model() of DIR/tokenizer.model:
//   tokens[i] = pieces[i].piece, scores[i] = pieces[i].score, types[i] = int(pieces[i].type),
//   add_space_prefix = add_dummy_prefix, remove_extra_whitespaces as read.
struct GgufVocab {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;  // TokenType numbers (1 normal, 2 unknown, 3 control, 6 byte ...)
  bool add_space_prefix = true;
  bool remove_extra_whitespaces = false;
};

struct HfToGgufOptions {
  GgmlType type = GgmlType::F16;  // matrices: F32, F16 or BF16; norms, biases, rope_freqs: F32
  std::string name;               // general.name; "" -> the directory's name
  // Written as tokenizer.ggml.* (model "llama") when set: a vocabulary shorter than n_vocab is
  // padded with "[PADi]" UNUSED tokens as llama.cpp's converter does. Without it the GGUF
  // has no vocabulary (it still runs from token ids).
  const GgufVocab* vocab = nullptr;
};

// The GGUF for `model` (format "hf"). Throws Error for a GGUF-loaded model, an unsupported
// output type, a vocabulary longer than n_vocab, or partial rotary dims or a fused QKV on a
// row with hf_qk_permute (the permutation above assumes n_rot == head_dim and separate Q, K).
GgufBuilder hf_to_gguf(const LoadedModel& model, const HfToGgufOptions& options);

}  // namespace llmctl
