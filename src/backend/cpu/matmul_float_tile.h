#pragma once
// Internal to the matmul fast path: the tile kernel for float weights (F32, F16, BF16), written
// once over a loader that widens 8 weights to 8 floats and an activation reader (f32 x, or
// f16 xh for the F16 weights). See matmul_kernels.h for the lane contract.
//
//   Loader::load8(row, i)            (AVX2) weights i .. i+7 of a row as floats
//   Loader::load_tail(row, i, m)     (AVX2) weights i .. i+m-1, zeros after (0 < m < 8)
//   Loader::load1(row, i)            (scalar) weight i as a float
//   Loader::kElemBytes               bytes per weight
//   Act::row(a, t)                   token t's activations (const float* or const uint16_t*)
//   Act::load1 / load8 / load_tail   as the Loader's, on that row

#include <cstring>

#include "backend/cpu/matmul_kernels.h"
#include "core/fp16.h"

namespace llmctl::cpu {

// f32 activations, read as they are.
struct ActF32 {
  static const float* row(const TileArgs& a, int t) { return a.x + t * a.n; }
  static float load1(const float* x, int64_t i) { return x[i]; }
#if defined(LLMCTL_HAVE_X86)
  LLMCTL_AVX2 static __m256 load8(const float* x, int64_t i) { return _mm256_loadu_ps(x + i); }
  LLMCTL_AVX2 static __m256 load_tail(const float* x, int64_t i, int64_t m) {
    float buf[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    std::memcpy(buf, x + i, static_cast<size_t>(m) * sizeof(float));
    return _mm256_loadu_ps(buf);
  }
#endif
};

// f16 activations (MatmulKernel::half_activations), widened exactly.
struct ActF16 {
  static const uint16_t* row(const TileArgs& a, int t) { return a.xh + t * a.n; }
  static float load1(const uint16_t* x, int64_t i) { return fp16_to_f32(x[i]); }
#if defined(LLMCTL_HAVE_X86)
  LLMCTL_AVX2 static __m256 load8(const uint16_t* x, int64_t i) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
  }
  LLMCTL_AVX2 static __m256 load_tail(const uint16_t* x, int64_t i, int64_t m) {
    uint16_t buf[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    std::memcpy(buf, x + i, static_cast<size_t>(m) * sizeof(uint16_t));
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(buf)));
  }
#endif
};

// Portable kernel: one (row, token) pair at a time, lanes emulated; same bits as the AVX2 tile.
template <class Loader, class Act>
struct FloatTileScalar {
  template <int R, int T>
  static void tile(const TileArgs& a) {
    for (int r = 0; r < R; ++r) {
      const uint8_t* row = a.w + static_cast<size_t>(r) * a.w_stride;
      for (int t = 0; t < T; ++t) {
        const auto* x = Act::row(a, t);
        float lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int64_t i = 0; i < a.n; i += 8) {
          for (int64_t k = 0; k < 8; ++k) {
            const bool in = i + k < a.n;
            const float wv = in ? Loader::load1(row, i + k) : 0.0f;
            const float xv = in ? Act::load1(x, i + k) : 0.0f;
            lanes[k] = std::fma(wv, xv, lanes[k]);
          }
        }
        a.out[t * a.out_stride + r] = hsum8_scalar(lanes);
      }
    }
  }
};

#if defined(LLMCTL_HAVE_X86)
// R rows x T tokens, R*T accumulators in registers; each weight vector serves T tokens.
template <class Loader, class Act>
struct FloatTileAvx2 {
  template <int R, int T>
  LLMCTL_AVX2 static void tile(const TileArgs& a) {
    constexpr size_t kR = static_cast<size_t>(R), kT = static_cast<size_t>(T);
    __m256 acc[kR][kT];
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
    const uint8_t* rows[kR];
    for (int r = 0; r < R; ++r) rows[r] = a.w + static_cast<size_t>(r) * a.w_stride;
    decltype(Act::row(a, 0)) xs[kT];
    for (int t = 0; t < T; ++t) xs[t] = Act::row(a, t);
    const int64_t n = a.n;
    // Decode: prefetch the next tile (contiguous rows) at the pace this one is read; see
    // QuantTileAvx2 (matmul_quant_tile.h).
    const char* next_tile = reinterpret_cast<const char*>(a.w + kR * a.w_stride);
    constexpr size_t kStepBytes = kR * 8 * Loader::kElemBytes;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      if constexpr (T == 1) {
        const char* p = next_tile + static_cast<size_t>(i / 8) * kStepBytes;
        for (size_t off = 0; off < kStepBytes; off += 64) _mm_prefetch(p + off, _MM_HINT_T1);
      }
      __m256 wv[kR];
      for (int r = 0; r < R; ++r) wv[r] = Loader::load8(rows[r], i);
      for (int t = 0; t < T; ++t) {
        const __m256 xv = Act::load8(xs[t], i);
        for (int r = 0; r < R; ++r) acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
      }
    }
    if (i < n) {  // zeros past the end: fma(0, 0, acc) leaves the lane as the scalar one
      __m256 wv[kR];
      for (int r = 0; r < R; ++r) wv[r] = Loader::load_tail(rows[r], i, n - i);
      for (int t = 0; t < T; ++t) {
        const __m256 xv = Act::load_tail(xs[t], i, n - i);
        for (int r = 0; r < R; ++r) acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
      }
    }
    for (int t = 0; t < T; ++t)
      for (int r = 0; r < R; ++r) a.out[t * a.out_stride + r] = hsum8_avx2(acc[r][t]);
  }
};
#endif

// The MatmulKernel of a float type: AVX2 when asked for (and compiled for x86), else scalar.
// half_activations: the tiles read f16 activations (tile_wide: the f32 ones).
template <class Loader>
MatmulKernel make_float_kernel(bool avx2, const char* avx2_name, const char* scalar_name,
                               bool half_activations = false) {
  MatmulKernel k;
  k.rows_decode = 4;
  k.rows_prefill = 3;
  k.tokens_prefill = 4;
  k.half_activations = half_activations;
  k.row_blocks = true;
#if defined(LLMCTL_HAVE_X86)
  if (avx2) {
    k.name = avx2_name;
    k.tile = half_activations ? &dispatch_tile<FloatTileAvx2<Loader, ActF16>>
                              : &dispatch_tile<FloatTileAvx2<Loader, ActF32>>;
    if (half_activations) k.tile_wide = &dispatch_tile<FloatTileAvx2<Loader, ActF32>>;
    return k;
  }
#endif
  (void)avx2;
  (void)avx2_name;
  k.name = scalar_name;
  k.tile = half_activations ? &dispatch_tile<FloatTileScalar<Loader, ActF16>>
                            : &dispatch_tile<FloatTileScalar<Loader, ActF32>>;
  if (half_activations) k.tile_wide = &dispatch_tile<FloatTileScalar<Loader, ActF32>>;
  return k;
}

}  // namespace llmctl::cpu
