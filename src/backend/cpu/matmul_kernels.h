#pragma once
// Internal to the matmul fast path (matmul_fast.h): the tile kernel interface each dtype file
// implements, and the lane arithmetic the AVX2 and scalar kernels share.
//
// A tile kernel computes out[t][r] for R rows x T tokens (1 <= R, T <= kMaxTile). Each pair
// (r, t) owns 8 float lanes; lane k accumulates in order over the row:
//   float weights:     acc_k = fma(w[i + k], x[i + k], acc_k)         for i = 0, 8, 16, ...
//                      (past the end of the row w = x = 0)
//   quantized weights: acc_k = fma(float(isum_k), d_w * d_x, acc_k)   for each 32-block, where
//                      isum_k = sum of q_w[j] * q_x[j], j = 4k .. 4k+3 (exact in int32)
//                      (Q4_1, w = q * d + m, then also adds its min term per lane:
//                      acc_k = fma(float(xsum_k) * d_x, m, acc_k), xsum_k = sum of q_x[j])
// then out = hsum8(acc).
//
// Every float product that feeds a sum is written as an explicit fma (std::fma, fmadd
// intrinsics) and no float expression has the shape a * b + c: GCC contracts such
// expressions into fma by default (-ffp-contract=fast, also for intrinsics), differently
// with and without FMA in the target, which would make the AVX2 and scalar bits differ.

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <utility>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define LLMCTL_HAVE_X86 1
#define LLMCTL_AVX2 __attribute__((target("avx2,fma,f16c")))
#endif

#include "core/ggml_type.h"

namespace llmctl::cpu {

constexpr int kMaxTile = 4;

struct TileArgs {
  const uint8_t* w;  // first row of the tile
  size_t w_stride;   // bytes from one row to the next
  int64_t n;         // row length in elements
  // Activations of the tile's first token; the next token is one stride further.
  const float* x;      // f32 (float kernels), stride n
  const int8_t* qs;    // int8 (quantized kernels), stride n
  const float* qd;     // block scales, stride n / 32
  float* out;          // out[t * out_stride + r]
  int64_t out_stride;  // d (the weight's row count)
  GgmlType type;       // the weight's dtype (the dequantizing kernel decodes rows with it)
  uint64_t call_id;    // distinct per matmul_fast call (keys the dequantized-row cache)
};

using TileFn = void (*)(const TileArgs& a, int n_rows, int n_tokens);

// One dtype's kernel and the tile shapes it is fast with.
struct MatmulKernel {
  const char* name = "unsupported";  // "q4_0 avx2"
  TileFn tile = nullptr;
  bool quantized = false;  // reads qs/qd instead of x
  int rows_decode = 4;     // R for n_tokens == 1
  int rows_prefill = 2;    // R x T for n_tokens > 1
  int tokens_prefill = 4;
};

// Per-dtype kernels (matmul_f32.cpp, matmul_f16.cpp, matmul_q8_0.cpp, matmul_q4_0.cpp,
// matmul_q4_1.cpp). avx2 == false gives the portable scalar kernel.
MatmulKernel matmul_kernel_f32(bool avx2);
MatmulKernel matmul_kernel_f16(bool avx2);
MatmulKernel matmul_kernel_bf16(bool avx2);
MatmulKernel matmul_kernel_q8_0(bool avx2);
MatmulKernel matmul_kernel_q4_0(bool avx2);
MatmulKernel matmul_kernel_q4_1(bool avx2);
// Any other type dequantize_row() decodes (Q5_0, Q5_1, Q4_K, Q5_K, Q6_K): each row of the
// tile is dequantized to f32 (quant/dequant.h) and multiplied by the F32 kernel, so the result
// is bit-identical to the F32 kernel on the dequantized weight, with its batch and thread
// invariance (matmul_dequant.cpp). A tile's rows stay decoded while its token tiles pass.
MatmulKernel matmul_kernel_dequant(GgmlType type, bool avx2);

// ---------------------------------------------------------------------------
// Tile tables: K::tile<R, T>(args) for every 1 <= R, T <= kMaxTile behind one TileFn
// ---------------------------------------------------------------------------
template <class K, int R, int T>
void tile_entry(const TileArgs& a) {
  K::template tile<R, T>(a);
}

template <class K, size_t... I>
constexpr std::array<void (*)(const TileArgs&), sizeof...(I)> make_tile_table(
    std::index_sequence<I...>) {
  return {
      &tile_entry<K, static_cast<int>(I) / kMaxTile + 1, static_cast<int>(I) % kMaxTile + 1>...};
}

template <class K>
void dispatch_tile(const TileArgs& a, int n_rows, int n_tokens) {
  static constexpr auto table =
      make_tile_table<K>(std::make_index_sequence<size_t{kMaxTile} * kMaxTile>());
  table[static_cast<size_t>((n_rows - 1) * kMaxTile + (n_tokens - 1))](a);
}

// ---------------------------------------------------------------------------
// Scalar lane arithmetic (the portable kernels; same results as the AVX2 lanes)
// ---------------------------------------------------------------------------
// ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)): the order of hsum8_avx2.
inline float hsum8_scalar(const float* l) {
  const float v0 = l[0] + l[4], v1 = l[1] + l[5], v2 = l[2] + l[6], v3 = l[3] + l[7];
  return (v0 + v2) + (v1 + v3);
}

// Quantized pair (r, t) over one block: lane k += float(sum q_w[4k..4k+3] * q_x[..]) * dd.
inline void lanes_block_scalar(const int* qw, const int8_t* qx, float dd, float* lanes) {
  for (int k = 0; k < 8; ++k) {
    int isum = 0;
    for (int j = 4 * k; j < 4 * k + 4; ++j) isum += qw[j] * qx[j];
    lanes[k] = std::fma(static_cast<float>(isum), dd, lanes[k]);
  }
}

// Q4_1's min m over one block: lane k += (float(sum q_x[4k..4k+3]) * d_x) * m.
inline void lanes_min_scalar(const int8_t* qx, float dx, float m, float* lanes) {
  for (int k = 0; k < 8; ++k) {
    const int xsum = qx[4 * k] + qx[4 * k + 1] + qx[4 * k + 2] + qx[4 * k + 3];
    lanes[k] = std::fma(static_cast<float>(xsum) * dx, m, lanes[k]);
  }
}

#if defined(LLMCTL_HAVE_X86)
// ---------------------------------------------------------------------------
// AVX2 helpers
// ---------------------------------------------------------------------------
LLMCTL_AVX2 inline float hsum8_avx2(__m256 a) {
  const __m128 v = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  const __m128 u = _mm_add_ps(v, _mm_movehl_ps(v, v));  // u0 = v0 + v2, u1 = v1 + v3
  return _mm_cvtss_f32(_mm_add_ss(u, _mm_movehdup_ps(u)));
}

LLMCTL_AVX2 inline float fp16_to_f32_f16c(const uint8_t* p) {
  const int bits = p[0] | (p[1] << 8);
  return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(bits)));
}

// 16 bytes of nibbles -> 32 bytes: low nibbles (elements 0..15), then high (16..31). The
// bytes are loaded into both halves at once; the upper half is shifted by 4.
LLMCTL_AVX2 inline __m256i unpack_nibbles_avx2(const uint8_t* qs) {
  const __m256i both =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  const __m256i shifted = _mm256_srlv_epi64(both, _mm256_setr_epi64x(0, 0, 4, 4));
  return _mm256_and_si256(shifted, _mm256_set1_epi8(0x0f));
}

#endif

}  // namespace llmctl::cpu
