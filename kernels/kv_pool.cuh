#pragma once
// The KV pools as the kernels write and read them (backend.h BufferType F32, F16, Q8_0, Q4_0):
// the Q8_0 / Q4_0 block quantizer of kv_store.cu and the element loads of the attention
// kernels. The quantizer and the loads are __host__ __device__, so tests/gpu/
// test_kernel_math_kv.cpp runs this very code on the CPU against src/quant (quantize_kv_row's
// bytes, dequant.h's values), with no GPU.
//
// The quantizer is ggml's reference round-to-nearest (quant/quantize.h "Rounding rules"): d from
// the block's largest magnitude, 1/d, each x * (1/d) rounded on its own before roundf (Q8_0) or
// before + 8.5 and truncation (Q4_0). nvcc contracts a * b + c into an FMA by default, which
// skips a rounding and changes some nibbles, so the device uses __fmul_rn / __fadd_rn, which it
// never contracts; the host test compiles as ISO C++, which does not contract either.
//
// Loads: element i of a head's K or V row. A block type's row of kv_dim values is kv_dim / 32
// blocks, and a head of head_dim (a multiple of 32: cache.h refuses others) starts at a block.
// The readers (device only, below) give the kernels one interface for every pool type: KvReadF32
// and KvReadF16 for the typed launchers (the common case, as before), KvReadAny for quantized or
// mixed pools, choosing by the pool's type at run time (one branch, the same for every thread).

#include <cmath>
#include <cstdint>

#include "kernels/common.cuh"
#include "kernels/kernels.h"

namespace llmctl::cuda {

constexpr int kKvQ8Bytes = 34;  // block_q8_0: fp16 d, int8 qs[32]
constexpr int kKvQ4Bytes = 18;  // block_q4_0: fp16 d, uint8 qs[16] (low nibbles 0..15, high 16..31)

// a * b and a + b, each rounded to float and never fused with a neighbour.
__host__ __device__ __forceinline__ float kv_mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  volatile float p = a * b;  // a barrier the host compiler cannot fold away
  return p;
#endif
}
__host__ __device__ __forceinline__ float kv_add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  volatile float s = a + b;
  return s;
#endif
}

// float -> IEEE binary16 bits, round to nearest even (core/fp16.h f32_to_fp16).
__host__ __device__ __forceinline__ uint16_t kv_float_to_fp16(float v) {
  return __half_raw(__float2half_rn(v)).x;
}

// (int8_t)v as ggml's C computes it, truncation toward zero; 0 for a value outside int8 or
// NaN (undefined in C; what x86 gives, and what src/quant defines).
__host__ __device__ __forceinline__ int kv_trunc_int8(float v) {
  if (!(v > -129.0f && v < 128.0f)) return 0;
  return static_cast<int>(v);
}

__host__ __device__ __forceinline__ void kv_store_fp16(uint8_t* p, float d) {
  const uint16_t bits = kv_float_to_fp16(d);
  p[0] = static_cast<uint8_t>(bits & 0xffu);
  p[1] = static_cast<uint8_t>(bits >> 8);
}

__host__ __device__ __forceinline__ float kv_block_scale(const uint8_t* block) {
  return fp16_to_float(static_cast<uint16_t>(block[0] | (block[1] << 8)));
}

// x[0 .. 32) -> one block_q8_0: d = max|x| / 127, q = roundf(x * (1/d)) (ties away from zero).
__host__ __device__ inline void kv_quantize_q8_0(const float* x, uint8_t* out) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = fmaxf(amax, fabsf(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  kv_store_fp16(out, d);
  for (int j = 0; j < 32; ++j) {
    const int q = kv_trunc_int8(roundf(kv_mul_rn(x[j], id)));
    out[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(q));
  }
}

// x[0 .. 32) -> one block_q4_0: max = the first element of largest magnitude, with its sign;
// d = max / -8, q = min(15, trunc(x * (1/d) + 8.5)).
__host__ __device__ inline void kv_quantize_q4_0(const float* x, uint8_t* out) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < 32; ++j)
    if (amax < fabsf(x[j])) {  // strict: the first of equal magnitudes wins
      amax = fabsf(x[j]);
      max = x[j];
    }
  const float d = max / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  kv_store_fp16(out, d);
  for (int j = 0; j < 16; ++j) {
    const int lo = kv_trunc_int8(kv_add_rn(kv_mul_rn(x[j], id), 8.5f));
    const int hi = kv_trunc_int8(kv_add_rn(kv_mul_rn(x[j + 16], id), 8.5f));
    out[2 + j] = static_cast<uint8_t>((lo < 15 ? lo : 15) | ((hi < 15 ? hi : 15) << 4));
  }
}

// Element i of a row of blocks (dequant.h's values: q * d, (q - 8) * d).
__host__ __device__ __forceinline__ float kv_q8_0_at(const uint8_t* row, int64_t i) {
  const uint8_t* b = row + (i / 32) * kKvQ8Bytes;
  return kv_mul_rn(static_cast<float>(static_cast<int8_t>(b[2 + i % 32])), kv_block_scale(b));
}
__host__ __device__ __forceinline__ float kv_q4_0_at(const uint8_t* row, int64_t i) {
  const uint8_t* b = row + (i / 32) * kKvQ4Bytes;
  const int j = static_cast<int>(i % 32);
  const int byte = b[2 + (j & 15)];
  const int q = j < 16 ? (byte & 15) : (byte >> 4);
  return kv_mul_rn(static_cast<float>(q - 8), kv_block_scale(b));
}

// Bytes of one pool row of kv_dim values.
__host__ __device__ __forceinline__ int64_t kv_row_bytes(KvPoolType t, int64_t kv_dim) {
  switch (t) {
    case KvPoolType::F32: return kv_dim * 4;
    case KvPoolType::F16: return kv_dim * 2;
    case KvPoolType::Q8_0: return kv_dim / 32 * kKvQ8Bytes;
    case KvPoolType::Q4_0: return kv_dim / 32 * kKvQ4Bytes;
  }
  return 0;
}

#if defined(__CUDACC__)

// Readers: head(slot, g) is KV head g of pool row `slot`; at(head, i) its element i as float.
__device__ __forceinline__ float kv_element(float v) { return v; }
__device__ __forceinline__ float kv_element(uint16_t bits) { return fp16_to_float(bits); }

template <class T>
struct KvReadTyped {
  const T* pool;
  int64_t kv_dim, head_dim;
  using Head = const T*;
  __device__ __forceinline__ Head head(int64_t slot, int64_t g) const {
    return pool + slot * kv_dim + g * head_dim;
  }
  __device__ __forceinline__ float at(Head h, int64_t i) const { return kv_element(h[i]); }
};
using KvReadF32 = KvReadTyped<float>;
using KvReadF16 = KvReadTyped<uint16_t>;

struct KvReadAny {
  const uint8_t* pool;
  KvPoolType type;
  int64_t kv_dim, head_dim;
  using Head = const uint8_t*;
  __device__ __forceinline__ Head head(int64_t slot, int64_t g) const {
    const uint8_t* row = pool + slot * kv_row_bytes(type, kv_dim);
    switch (type) {
      case KvPoolType::F32: return row + g * head_dim * 4;
      case KvPoolType::F16: return row + g * head_dim * 2;
      case KvPoolType::Q8_0: return row + g * head_dim / 32 * kKvQ8Bytes;
      case KvPoolType::Q4_0: return row + g * head_dim / 32 * kKvQ4Bytes;
    }
    return row;
  }
  __device__ __forceinline__ float at(Head h, int64_t i) const {
    switch (type) {
      case KvPoolType::F32: return reinterpret_cast<const float*>(h)[i];
      case KvPoolType::F16: return fp16_to_float(reinterpret_cast<const uint16_t*>(h)[i]);
      case KvPoolType::Q8_0: return kv_q8_0_at(h, i);
      case KvPoolType::Q4_0: return kv_q4_0_at(h, i);
    }
    return 0.0f;
  }
};

// The reader of a pool of kv_dim-value rows of heads of head_dim (host side, for launchers).
inline KvReadF32 kv_reader(const float* pool, int64_t kv_dim, int64_t head_dim) {
  return {pool, kv_dim, head_dim};
}
inline KvReadF16 kv_reader(const uint16_t* pool, int64_t kv_dim, int64_t head_dim) {
  return {pool, kv_dim, head_dim};
}
inline KvReadAny kv_reader(KvPoolView pool, int64_t kv_dim, int64_t head_dim) {
  return {static_cast<const uint8_t*>(pool.data), pool.type, kv_dim, head_dim};
}

#endif  // __CUDACC__

}  // namespace llmctl::cuda
