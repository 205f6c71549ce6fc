#pragma once
// Reference dequantization: ggml block layouts decoded one block at a time, written for
// clarity. The per-block functions are plain inline C++ over bytes (no alignment assumed)
// so a CUDA kernel can later share them as __host__ __device__ code.
//
//   block_q8_0 (34 B): fp16 d; int8 qs[32]             x[j] = qs[j] * d
//   block_q4_0 (18 B): fp16 d; uint8 qs[16]            x[j] = ((qs[j] & 15) - 8) * d,
//                                                      x[j + 16] = ((qs[j] >> 4) - 8) * d
//   block_q4_1 (20 B): fp16 d; fp16 m; uint8 qs[16]    x[j] = (qs[j] & 15) * d + m, ...

#include <cstdint>
#include <cstring>

#include "core/fp16.h"
#include "core/ggml_type.h"

namespace llmctl {

inline uint16_t load_u16_le(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}

inline void dequantize_block_q8_0(const uint8_t* block, float* out) {
  const float d = fp16_to_f32(load_u16_le(block));
  for (int j = 0; j < 32; ++j) {
    int8_t q;
    std::memcpy(&q, block + 2 + j, 1);
    out[j] = static_cast<float>(q) * d;
  }
}

inline void dequantize_block_q4_0(const uint8_t* block, float* out) {
  const float d = fp16_to_f32(load_u16_le(block));
  const uint8_t* qs = block + 2;
  for (int j = 0; j < 16; ++j) {
    out[j] = static_cast<float>((qs[j] & 0x0f) - 8) * d;
    out[j + 16] = static_cast<float>((qs[j] >> 4) - 8) * d;
  }
}

inline void dequantize_block_q4_1(const uint8_t* block, float* out) {
  const float d = fp16_to_f32(load_u16_le(block));
  const float m = fp16_to_f32(load_u16_le(block + 2));
  const uint8_t* qs = block + 4;
  for (int j = 0; j < 16; ++j) {
    out[j] = static_cast<float>(qs[j] & 0x0f) * d + m;
    out[j + 16] = static_cast<float>(qs[j] >> 4) * d + m;
  }
}

// Whether dequantize_row() handles `type` (F32, F16, BF16, Q8_0, Q4_0, Q4_1).
bool can_dequantize(GgmlType type);

// Decodes n elements of `type` from `src` (n / block_size whole blocks, in ggml's layout)
// into dst[0..n). Throws Error for an unsupported type or an n that is negative or not a
// multiple of the block size.
void dequantize_row(GgmlType type, const void* src, float* dst, int64_t n);

}  // namespace llmctl
