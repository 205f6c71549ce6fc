#pragma once
// Helpers shared by every kernel in kernels/: scalar conversions, ggml block layouts and
// their dequantization, warp reductions.
//
// The conversions and block dequantization are __host__ __device__ and compile with the host
// C++ compiler too (only <cuda_fp16.h> and <cuda_runtime.h> are needed), so
// tests/gpu/test_kernel_math.cpp runs exactly this code on the CPU against the independent
// reference in src/quant/dequant.cpp, on machines without a GPU. Device-only helpers sit in
// the `__CUDACC__` section at the end.
//
// The block structs duplicate the layouts the CPU reference reads (kernels/ may not include
// src/); both follow ggml, and the static_asserts pin the sizes that GGUF files rely on.

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

namespace llmctl::cuda {

// ---------------------------------------------------------------------------
// Scalar conversions
// ---------------------------------------------------------------------------

// IEEE binary16 bits -> float (exact: every half is a float).
__host__ __device__ __forceinline__ float fp16_to_float(uint16_t bits) {
  __half_raw raw;
  raw.x = bits;
  return __half2float(__half(raw));
}

// bfloat16 bits -> float: bf16 is the top half of a float, so the conversion is a shift (exact).
__host__ __device__ __forceinline__ float bf16_to_float(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// ---------------------------------------------------------------------------
// ggml block layouts (32 elements per block)
// ---------------------------------------------------------------------------

constexpr int kQK = 32;  // elements per block for Q8_0, Q4_0, Q4_1

// value[j] = qs[j] * d
struct BlockQ8_0 {
  uint16_t d;  // fp16 scale
  int8_t qs[kQK];
};
// value[j] = ((qs[j] & 15) - 8) * d, value[j + 16] = ((qs[j] >> 4) - 8) * d, j < 16
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK / 2];
};
// value[j] = (qs[j] & 15) * d + m, value[j + 16] = (qs[j] >> 4) * d + m, j < 16
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;  // fp16 minimum
  uint8_t qs[kQK / 2];
};
// MXFP4: value[j] = kMxfp4Levels[qs[j] & 15] * h, value[j + 16] = kMxfp4Levels[qs[j] >> 4] * h,
// h = 2^(e - 128) (ggml's ggml_e8m0_to_fp32_half: the E8M0 scale halved, as the levels are
// the E2M1 values doubled)
struct BlockMxfp4 {
  uint8_t e;  // E8M0 exponent
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ8_0) == 34, "ggml block_q8_0 is 34 bytes");
static_assert(sizeof(BlockMxfp4) == 17, "ggml block_mxfp4 is 17 bytes");
static_assert(sizeof(BlockQ4_0) == 18, "ggml block_q4_0 is 18 bytes");
static_assert(sizeof(BlockQ4_1) == 20, "ggml block_q4_1 is 20 bytes");

// ---------------------------------------------------------------------------
// Row formats: how to turn a group of consecutive elements of one row into floats
// ---------------------------------------------------------------------------
// Each format says how many consecutive elements one call produces (kGroup) and how many bytes
// a row of `row_len` elements takes. Group g covers elements [g*kGroup, (g+1)*kGroup) of the row.
// Block formats use groups of 4 so a thread writes one aligned float4; 4 divides 16, so a group
// never straddles the low/high nibble halves of a Q4 block.
//
// Exactness: q*d is exact in fp32 for 4- and 8-bit q and fp16 d (at most 8 + 11 significant
// bits), so q*d + m rounds once whether or not the compiler contracts it into an FMA. The
// device result therefore equals any correct CPU reference bit for bit.

struct FormatF32 {
  static constexpr int kGroup = 1;
  __host__ __device__ static int64_t row_bytes(int64_t row_len) { return row_len * 4; }
  __host__ __device__ static void dequantize_group(const uint8_t* row, int64_t g, float* dst) {
    dst[0] = reinterpret_cast<const float*>(row)[g];
  }
};

struct FormatF16 {
  static constexpr int kGroup = 1;
  __host__ __device__ static int64_t row_bytes(int64_t row_len) { return row_len * 2; }
  __host__ __device__ static void dequantize_group(const uint8_t* row, int64_t g, float* dst) {
    dst[0] = fp16_to_float(reinterpret_cast<const uint16_t*>(row)[g]);
  }
};

struct FormatBF16 {
  static constexpr int kGroup = 1;
  __host__ __device__ static int64_t row_bytes(int64_t row_len) { return row_len * 2; }
  __host__ __device__ static void dequantize_group(const uint8_t* row, int64_t g, float* dst) {
    dst[0] = bf16_to_float(reinterpret_cast<const uint16_t*>(row)[g]);
  }
};

struct FormatQ8_0 {
  static constexpr int kGroup = 4;
  __host__ __device__ static int64_t row_bytes(int64_t row_len) {
    return row_len / kQK * static_cast<int64_t>(sizeof(BlockQ8_0));
  }
  __host__ __device__ static void dequantize_group(const uint8_t* row, int64_t g, float* dst) {
    const BlockQ8_0& b = reinterpret_cast<const BlockQ8_0*>(row)[g / (kQK / kGroup)];
    const int j0 = static_cast<int>(g % (kQK / kGroup)) * kGroup;
    const float d = fp16_to_float(b.d);
    for (int k = 0; k < kGroup; ++k) dst[k] = static_cast<float>(b.qs[j0 + k]) * d;
  }
};

// Shared by Q4_0 and Q4_1: the 4-bit codes (0..15) of elements [j0, j0 + 4) of a block.
__host__ __device__ __forceinline__ void q4_codes(const uint8_t* qs, int j0, int* q) {
  const int half = kQK / 2;
  const int shift = j0 < half ? 0 : 4;  // elements 16..31 live in the high nibbles
  const int base = j0 % half;
  for (int k = 0; k < 4; ++k) q[k] = (qs[base + k] >> shift) & 15;
}

struct FormatQ4_0 {
  static constexpr int kGroup = 4;
  __host__ __device__ static int64_t row_bytes(int64_t row_len) {
    return row_len / kQK * static_cast<int64_t>(sizeof(BlockQ4_0));
  }
  __host__ __device__ static void dequantize_group(const uint8_t* row, int64_t g, float* dst) {
    const BlockQ4_0& b = reinterpret_cast<const BlockQ4_0*>(row)[g / (kQK / kGroup)];
    const int j0 = static_cast<int>(g % (kQK / kGroup)) * kGroup;
    const float d = fp16_to_float(b.d);
    int q[4];
    q4_codes(b.qs, j0, q);
    for (int k = 0; k < kGroup; ++k) dst[k] = static_cast<float>(q[k] - 8) * d;
  }
};

// ggml's kvalues_mxfp4, index -> 2 * the E2M1 value (index 8 is -0: an int 0).
__host__ __device__ __forceinline__ int mxfp4_level(int code) {
  constexpr int8_t kLevels[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
  return kLevels[code];
}

// 2^(e - 128), exact: the denormals 2^-128, 2^-127 for e = 0, 1, else exponent field e - 1.
__host__ __device__ __forceinline__ float e8m0_half_to_float(uint8_t e) {
  const uint32_t u = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

struct FormatMxfp4 {
  static constexpr int kGroup = 4;
  __host__ __device__ static int64_t row_bytes(int64_t row_len) {
    return row_len / kQK * static_cast<int64_t>(sizeof(BlockMxfp4));
  }
  // A level times a power of two is exact (or the same denormal rounding as the CPU's).
  __host__ __device__ static void dequantize_group(const uint8_t* row, int64_t g, float* dst) {
    const BlockMxfp4& b = reinterpret_cast<const BlockMxfp4*>(row)[g / (kQK / kGroup)];
    const int j0 = static_cast<int>(g % (kQK / kGroup)) * kGroup;
    const float h = e8m0_half_to_float(b.e);
    int q[4];
    q4_codes(b.qs, j0, q);
    for (int k = 0; k < kGroup; ++k) dst[k] = static_cast<float>(mxfp4_level(q[k])) * h;
  }
};

struct FormatQ4_1 {
  static constexpr int kGroup = 4;
  __host__ __device__ static int64_t row_bytes(int64_t row_len) {
    return row_len / kQK * static_cast<int64_t>(sizeof(BlockQ4_1));
  }
  __host__ __device__ static void dequantize_group(const uint8_t* row, int64_t g, float* dst) {
    const BlockQ4_1& b = reinterpret_cast<const BlockQ4_1*>(row)[g / (kQK / kGroup)];
    const int j0 = static_cast<int>(g % (kQK / kGroup)) * kGroup;
    const float d = fp16_to_float(b.d);
    const float m = fp16_to_float(b.m);
    int q[4];
    q4_codes(b.qs, j0, q);
    for (int k = 0; k < kGroup; ++k) dst[k] = static_cast<float>(q[k]) * d + m;
  }
};

// ---------------------------------------------------------------------------
// Device-only helpers
// ---------------------------------------------------------------------------
#if defined(__CUDACC__)

constexpr unsigned kFullWarpMask = 0xffffffffu;
constexpr int kWarpSize = 32;

// Sum of `v` over the 32 lanes of a warp; every lane gets the result. All lanes must call it.
__device__ __forceinline__ float warp_reduce_sum(float v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    v += __shfl_xor_sync(kFullWarpMask, v, offset);
  return v;
}

// Blocks for a grid-stride loop over `total` items with `threads` per block: enough to fill
// the device, capped so the grid's x dimension stays well inside its limit.
inline unsigned grid_for(int64_t total, int threads) {
  constexpr int64_t kMaxBlocks = int64_t{1} << 16;
  int64_t blocks = (total + threads - 1) / threads;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks);
}

#endif  // __CUDACC__

}  // namespace llmctl::cuda
