#pragma once
// Internal to the matmul fast path: the tile kernel for float weights (F32, F16, BF16), written
// once over a loader that widens 8 weights to 8 floats. See matmul_kernels.h for the lane
// contract; activations are f32.
//
//   Loader::load8(row, i)            (AVX2) weights i .. i+7 of a row as floats
//   Loader::load_tail(row, i, m)     (AVX2) weights i .. i+m-1, zeros after (0 < m < 8)
//   Loader::load1(row, i)            (scalar) weight i as a float
//   Loader::kElemBytes               bytes per weight

#include <cstring>

#include "backend/cpu/matmul_kernels.h"

namespace llmctl::cpu {

// Portable kernel: one (row, token) pair at a time, lanes emulated; same bits as the AVX2 tile.
template <class Loader>
struct FloatTileScalar {
  template <int R, int T>
  static void tile(const TileArgs& a) {
    for (int r = 0; r < R; ++r) {
      const uint8_t* row = a.w + static_cast<size_t>(r) * a.w_stride;
      for (int t = 0; t < T; ++t) {
        const float* x = a.x + t * a.n;
        float lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int64_t i = 0; i < a.n; i += 8) {
          for (int64_t k = 0; k < 8; ++k) {
            const bool in = i + k < a.n;
            const float wv = in ? Loader::load1(row, i + k) : 0.0f;
            const float xv = in ? x[i + k] : 0.0f;
            lanes[k] = std::fma(wv, xv, lanes[k]);
          }
        }
        a.out[t * a.out_stride + r] = hsum8_scalar(lanes);
      }
    }
  }
};

#if defined(LLMCTL_HAVE_X86)
LLMCTL_AVX2 inline __m256i tail_mask_avx2(int64_t m) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(m)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// R rows x T tokens, R*T accumulators in registers; each weight vector serves T tokens.
template <class Loader>
struct FloatTileAvx2 {
  template <int R, int T>
  LLMCTL_AVX2 static void tile(const TileArgs& a) {
    constexpr size_t kR = static_cast<size_t>(R), kT = static_cast<size_t>(T);
    __m256 acc[kR][kT];
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
    const uint8_t* rows[kR];
    for (int r = 0; r < R; ++r) rows[r] = a.w + static_cast<size_t>(r) * a.w_stride;
    const int64_t n = a.n;
    // Decode: prefetch the next tile (contiguous rows) at the pace this one is read; see
    // QuantTileAvx2 (matmul_quant_tile.h).
    const char* next_tile = reinterpret_cast<const char*>(a.w + kR * a.w_stride);
    constexpr size_t kStepBytes = kR * 8 * Loader::kElemBytes;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      if constexpr (T == 1) {
        const char* p = next_tile + static_cast<size_t>(i / 8) * kStepBytes;
        for (size_t off = 0; off < kStepBytes; off += 64) _mm_prefetch(p + off, _MM_HINT_T0);
      }
      __m256 wv[kR];
      for (int r = 0; r < R; ++r) wv[r] = Loader::load8(rows[r], i);
      for (int t = 0; t < T; ++t) {
        const __m256 xv = _mm256_loadu_ps(a.x + t * n + i);
        for (int r = 0; r < R; ++r) acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
      }
    }
    if (i < n) {  // zeros past the end: fma(0, 0, acc) leaves the lane as the scalar one
      const __m256i mask = tail_mask_avx2(n - i);
      __m256 wv[kR];
      for (int r = 0; r < R; ++r) wv[r] = Loader::load_tail(rows[r], i, n - i);
      for (int t = 0; t < T; ++t) {
        const __m256 xv = _mm256_maskload_ps(a.x + t * n + i, mask);
        for (int r = 0; r < R; ++r) acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
      }
    }
    for (int t = 0; t < T; ++t)
      for (int r = 0; r < R; ++r) a.out[t * a.out_stride + r] = hsum8_avx2(acc[r][t]);
  }
};
#endif

// The MatmulKernel of a float type: AVX2 when asked for (and compiled for x86), else scalar.
template <class Loader>
MatmulKernel make_float_kernel(bool avx2, const char* avx2_name, const char* scalar_name) {
  MatmulKernel k;
  k.rows_decode = 4;
  k.rows_prefill = 3;
  k.tokens_prefill = 4;
#if defined(LLMCTL_HAVE_X86)
  if (avx2) {
    k.name = avx2_name;
    k.tile = &dispatch_tile<FloatTileAvx2<Loader>>;
    return k;
  }
#endif
  (void)avx2;
  (void)avx2_name;
  k.name = scalar_name;
  k.tile = &dispatch_tile<FloatTileScalar<Loader>>;
  return k;
}

}  // namespace llmctl::cpu
