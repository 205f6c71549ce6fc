#pragma once
// ModelConfig: the hyperparameters of a Llama-family model, read from GGUF metadata.
// Architectures: llama (normal rope) and qwen2 (neox rope, q/k/v biases); both use the
// "{arch}.key" pattern below.

#include <cstdint>
#include <string>

#include "core/rope_math.h"

namespace llmctl {

class GgufFile;

struct ModelConfig {
  std::string arch;                       // general.architecture: "llama" or "qwen2"
  int64_t n_vocab = 0;                    // token_embd.weight shape[1]
  int64_t n_embd = 0;                     // {arch}.embedding_length
  int64_t n_layers = 0;                   // {arch}.block_count
  int64_t n_heads = 0;                    // {arch}.attention.head_count
  int64_t n_kv_heads = 0;                 // {arch}.attention.head_count_kv (default n_heads)
  int64_t head_dim = 0;                   // {arch}.attention.key_length (default n_embd / n_heads)
  int64_t n_ff = 0;                       // {arch}.feed_forward_length
  int64_t n_ctx_train = 0;                // {arch}.context_length
  int64_t n_rot = 0;                      // {arch}.rope.dimension_count (default head_dim)
  float rms_eps = 1e-5f;                  // {arch}.attention.layer_norm_rms_epsilon
  double rope_freq_base = 10000.0;        // {arch}.rope.freq_base
  std::string rope_scaling_type;          // {arch}.rope.scaling.type ("" = none, "linear", ...)
  double rope_scaling_factor = 1.0;       // {arch}.rope.scaling.factor
  double rope_freq_scale = 1.0;           // 1 / factor for linear scaling, else 1
  RopeType rope_type = RopeType::Normal;  // llama: Normal; qwen2: Neox
  bool has_qkv_bias = false;              // qwen2

  int64_t q_dim() const { return n_heads * head_dim; }      // rows of wq
  int64_t kv_dim() const { return n_kv_heads * head_dim; }  // rows of wk, wv
};

// Reads and validates the config. Throws FileError naming the file and the key for an
// unsupported architecture, a missing or out-of-range value, or inconsistent head counts.
ModelConfig config_from_gguf(const GgufFile& file);

}  // namespace llmctl
