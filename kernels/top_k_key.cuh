#pragma once
// The ranking key of kernels/top_k.cu as __host__ __device__ functions, so
// tests/gpu/test_kernel_math.cpp checks its order on the CPU against the contract (backend.h
// top_k: value descending, equal values lower index first, +0 == -0, NaN below everything).
//
// Every (value, index) pair maps to a distinct 64-bit unsigned key whose order is that order:
//   high 32 bits  the value's bits made monotonic (negative: all bits flipped; positive: sign
//                 bit set); -0 counted as +0; NaN -> 0, below -inf (whose key is 0x007fffff)
//   low 32 bits   0xffffffff - index: for equal values the lower index has the larger key
// Key 0 never occurs (index < 2^31), so it can pad a sort.

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

namespace llmctl::cuda {

using TopKKey = unsigned long long;

__host__ __device__ __forceinline__ uint32_t float_bits(float v) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(v);
#else
  uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  return u;
#endif
}

__host__ __device__ __forceinline__ TopKKey top_k_key(float v, int64_t index) {
  uint32_t ord = 0;  // NaN
  if (v == v) {
    const uint32_t bits = v == 0.0f ? 0u : float_bits(v);
    ord = (bits & 0x80000000u) != 0 ? ~bits : (bits | 0x80000000u);
  }
  return (static_cast<TopKKey>(ord) << 32) |
         static_cast<TopKKey>(0xffffffffu - static_cast<uint32_t>(index));
}

__host__ __device__ __forceinline__ int32_t top_k_key_index(TopKKey key) {
  return static_cast<int32_t>(0xffffffffu - static_cast<uint32_t>(key & 0xffffffffull));
}

}  // namespace llmctl::cuda
