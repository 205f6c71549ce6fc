#pragma once
// Internal to the matmul fast path: the AVX-512 version of the float tile (matmul_float_tile.h),
// for a CPU with matmul_fast_has_avx512(). Same loaders and activation readers (their AVX2
// load8 / load_tail, inlined here), same lane contract, so the same bits as FloatTileScalar:
// each (row, token) pair owns 8 float lanes, lane k accumulates fma(w[i + k], x[i + k], acc_k)
// over i = 0, 8, 16, ... in order, then out = hsum8 in the fixed order.
//
// Two pairs share a zmm: rows r and r + 1 of one token in the low and high 8 lanes, the
// token's 8 activations broadcast to both halves. One fma then advances two pairs, and a tile
// holds up to 6 rows x 8 tokens (24 zmm accumulators; the AVX2 tile 3 x 4 in 12 ymm).

#include <array>
#include <utility>

#include "backend/cpu/matmul_float_tile.h"

namespace llmctl::cpu {

#if defined(LLMCTL_HAVE_X86)
LLMCTL_AVX512_BEGIN

// 6 rows x 8 tokens: 24 zmm accumulators, 3 weight vectors and a broadcast fit the 32
// registers. One core, 256 tokens, thread CPU time (bench_matmul --cpu-time; noisy shared
// machine), GFLOP/s F32 / F16 / BF16 on 2048x2048: 8x4 73 / 57 / 58, 6x8 80 / 64 / 86;
// 2048x8192: 8x4 50 / 69 / 50, 6x8 60 / 65 / 70 (4x8, 4x4, 2x8 slower; AVX2 48 / 52 / -).
constexpr int kFloatTileRows512 = 6, kFloatTileTokens512 = 8;

template <class Loader, class Act>
struct FloatTileAvx512 {
  LLMCTL_AVX512 static __m512 halves(__m256 lo, __m256 hi) {
    return _mm512_insertf32x8(_mm512_zextps256_ps512(lo), hi, 1);
  }

  // R rows (1..6) x T tokens (1..8). An odd R's last pair repeats its row in the high half
  // (computed, not stored).
  template <int R, int T>
  LLMCTL_AVX512 static void tile(const TileArgs& a) {
    constexpr int P = (R + 1) / 2;
    constexpr size_t kP = static_cast<size_t>(P), kT = static_cast<size_t>(T);
    __m512 acc[kP][kT];
    for (int p = 0; p < P; ++p)
      for (int t = 0; t < T; ++t) acc[p][t] = _mm512_setzero_ps();
    const uint8_t* rows[2 * kP];
    for (int r = 0; r < 2 * P; ++r)
      rows[r] = a.w + static_cast<size_t>(r < R ? r : R - 1) * a.w_stride;
    decltype(Act::row(a, 0)) xs[kT];
    for (int t = 0; t < T; ++t) xs[t] = Act::row(a, t);
    const int64_t n = a.n;
    // Decode: prefetch the next tile (contiguous rows) at the pace this one is read, into L2
    // (prefetcht1): into L1 it evicts lines still in use (F16 decode 1.09x with L2 on a
    // 1B-shape file; BENCHMARKS.md, 2026-12-03 afternoon).
    const char* next_tile = reinterpret_cast<const char*>(a.w + static_cast<size_t>(R) * a.w_stride);
    constexpr size_t kStepBytes = static_cast<size_t>(R) * 8 * Loader::kElemBytes;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      if constexpr (T == 1) {
        const char* p = next_tile + static_cast<size_t>(i / 8) * kStepBytes;
        for (size_t off = 0; off < kStepBytes; off += 64) _mm_prefetch(p + off, _MM_HINT_T1);
      }
      __m512 wv[kP];
      for (int p = 0; p < P; ++p)
        wv[p] = halves(Loader::load8(rows[2 * p], i), Loader::load8(rows[2 * p + 1], i));
      for (int t = 0; t < T; ++t) {
        const __m512 xv = _mm512_broadcast_f32x8(Act::load8(xs[t], i));
        for (int p = 0; p < P; ++p) acc[p][t] = _mm512_fmadd_ps(wv[p], xv, acc[p][t]);
      }
    }
    if (i < n) {  // zeros past the end: fma(0, 0, acc) leaves the lane as the scalar one
      __m512 wv[kP];
      for (int p = 0; p < P; ++p)
        wv[p] = halves(Loader::load_tail(rows[2 * p], i, n - i),
                       Loader::load_tail(rows[2 * p + 1], i, n - i));
      for (int t = 0; t < T; ++t) {
        const __m512 xv = _mm512_broadcast_f32x8(Act::load_tail(xs[t], i, n - i));
        for (int p = 0; p < P; ++p) acc[p][t] = _mm512_fmadd_ps(wv[p], xv, acc[p][t]);
      }
    }
    for (int t = 0; t < T; ++t)
      for (int p = 0; p < P; ++p) {
        float* o = a.out + t * a.out_stride + 2 * p;
        o[0] = hsum8_avx2(_mm512_castps512_ps256(acc[p][t]));
        if (2 * p + 1 < R) o[1] = hsum8_avx2(_mm512_extractf32x8_ps(acc[p][t], 1));
      }
  }

  template <int R, int T>
  static void entry(const TileArgs& a) {
    tile<R, T>(a);
  }

  template <size_t... I>
  static constexpr std::array<void (*)(const TileArgs&), sizeof...(I)> table(
      std::index_sequence<I...>) {
    return {&entry<static_cast<int>(I) / kFloatTileTokens512 + 1,
                   static_cast<int>(I) % kFloatTileTokens512 + 1>...};
  }

  static void dispatch(const TileArgs& a, int n_rows, int n_tokens) {
    static constexpr auto fns = table(
        std::make_index_sequence<size_t{kFloatTileRows512} * kFloatTileTokens512>());
    fns[static_cast<size_t>((n_rows - 1) * kFloatTileTokens512 + (n_tokens - 1))](a);
  }
};

LLMCTL_AVX512_END
#endif  // LLMCTL_HAVE_X86

// The AVX-512 MatmulKernel of a float type (half_activations as make_float_kernel's); none
// (tile == nullptr) off x86.
template <class Loader>
MatmulKernel make_float_kernel_avx512(const char* name, bool half_activations = false) {
  MatmulKernel k;
#if defined(LLMCTL_HAVE_X86)
  k.name = name;
  k.rows_decode = kFloatTileRows512;
  k.rows_prefill = kFloatTileRows512;
  k.tokens_prefill = kFloatTileTokens512;
  // F16 weights: f16-rounded activations, widened back to f32 before the tile
  // (halves_widened), so the tile reads f32 and broadcasts each token's 8 values from memory.
  // Converting f16 activations in the tile instead costs a vcvtph2ps and a shuffle per token
  // and step, on the ports of the 512-bit FMAs: 1 core, 256 tokens, 2048x2048, Zen 4: 62-65
  // GFLOP/s against 80-97 widened (BENCHMARKS.md, 2026-12-04).
  k.half_activations = half_activations;
  k.halves_widened = half_activations;
  k.row_blocks = true;
  k.tile = &FloatTileAvx512<Loader, ActF32>::dispatch;
  if (half_activations) k.tile_wide = k.tile;
#else
  (void)name;
  (void)half_activations;
#endif
  return k;
}

}  // namespace llmctl::cpu
