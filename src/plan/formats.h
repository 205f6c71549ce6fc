#pragma once
// Storage formats kvplan prices: weight types (bytes per parameter, which tensors they apply
// to) and KV-cache element types (bytes per element, as whole quantization blocks).

#include <cstdint>
#include <string>

namespace llmctl::plan {

struct WeightFormat {
  std::string name;             // "bf16", "fp8", "int4-g128", "q4_k", "gguf"
  double bytes_per_param = 2;   // layer matrices
  // Embedding table and lm_head: FP8/INT8/GPTQ/AWQ checkpoints keep them in 16 bits; GGUF
  // types quantize them too (an approximation: llama.cpp's Q4_0 keeps output.weight in Q6_K).
  bool embeddings_16bit = false;
  bool fp8_compute = false;     // matmuls can run at the GPU's FP8 rate
  bool from_file = false;       // "gguf": the file's own tensor bytes
  int64_t group_size = 0;       // int4: elements per scale group
};

// f32, f16, bf16, fp8, int8, q8_0, q4_0, q4_k, int4 (= gptq), gptq, awq, int4-gN, gguf.
// `group_size` applies to int4/gptq/awq. Throws Error on an unknown name.
WeightFormat parse_weight_format(const std::string& name, int64_t group_size = 128);

struct KvFormat {
  std::string name;        // "f16"
  int64_t block_elems = 1;  // elements per quantization block
  int64_t block_bytes = 2;  // bytes per block
  // Bytes for `n` elements (whole blocks; llama.cpp quantizes K/V rows in blocks of 32).
  uint64_t bytes(int64_t n) const {
    return static_cast<uint64_t>((n + block_elems - 1) / block_elems * block_bytes);
  }
  double bytes_per_elem() const { return static_cast<double>(block_bytes) / static_cast<double>(block_elems); }
};

// f32, f16, bf16, fp8 (e4m3/e5m2), q8_0, q4_0. Throws Error on an unknown name.
KvFormat parse_kv_format(const std::string& name);

}  // namespace llmctl::plan
