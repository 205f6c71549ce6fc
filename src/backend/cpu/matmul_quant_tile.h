#pragma once
// Internal to the matmul fast path: the tile kernel for block-quantized weights (Q8_0, Q4_0,
// Q4_1) against int8 activations (quantize_activations.h), written once over a block trait.
// Every block starts with its fp16 scale d; Q4_1's fp16 min m follows at byte 2.
//
//   Block::kBytes                   bytes per 32-element block
//   Block::weights(blk, int q[32])  (scalar) the 32 integer weights w / d: Q8_0 q, Q4_0 q - 8,
//                                   Q4_1 q (its min is added separately)
//   Block::weights_avx2(blk)        (AVX2) 32 bytes: Q8_0 q (signed), Q4_0 and Q4_1 the
//                                   nibbles q in 0..15 (unsigned)
//   Block::kSigned                  weights_avx2 is signed (Q8_0)
//   Block::kOffset8                 the weight is q - 8 (Q4_0)
//   Block::kHasMin                  the weight is q * d + m (Q4_1): adds m * d_x * sum(q_x)
//
// Per pair (r, t) and block b (matmul_kernels.h): lane k += float(isum_k) * (d_w * d_x), and
// for Q4_1 then lane k += (float(xsum_k) * d_x) * m; out = hsum8(lanes). The integer sums are exact
// (|q_w| <= 128, |q_x| <= 127), so the AVX2 and the scalar kernel agree bit for bit.

#include "backend/cpu/matmul_kernels.h"
#include "quant/dequant.h"

namespace llmctl::cpu {

template <class Block>
struct QuantTileScalar {
  template <int R, int T>
  static void tile(const TileArgs& a) {
    const int64_t nb = a.n / 32;
    for (int r = 0; r < R; ++r) {
      const uint8_t* row = a.w + static_cast<size_t>(r) * a.w_stride;
      for (int t = 0; t < T; ++t) {
        float lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int64_t b = 0; b < nb; ++b) {
          const uint8_t* blk = row + static_cast<size_t>(b) * Block::kBytes;
          int qw[32];
          Block::weights(blk, qw);
          const float dx = a.qd[t * nb + b];
          const int8_t* qx = a.qs + t * a.n + 32 * b;
          lanes_block_scalar(qw, qx, fp16_to_f32(load_u16_le(blk)) * dx, lanes);
          if constexpr (Block::kHasMin)
            lanes_min_scalar(qx, dx, fp16_to_f32(load_u16_le(blk + 2)), lanes);
        }
        const float v = hsum8_scalar(lanes);
        a.out[t * a.out_stride + r] = v;
      }
    }
  }
};

#if defined(LLMCTL_HAVE_X86)
// Per block and row: the weight bytes (Block::weights_avx2), d_w broadcast (F16C); per token:
// the activation bytes and d_x broadcast; per pair: the lane sums, one multiply d_w * d_x and
// one fma. The lane sums by weight encoding (all give the scalar kernel's exact isum_k):
//   kSigned   (Q8_0)    maddubs(|w|, sign(x, w))            the sign trick, as ggml
//   kOffset8  (Q4_0)    maddubs(q, x) - 8 * (lane sums of x) with q = w + 8 in 0..15: the
//                       lane sums of x are shared by the tile's rows (cheaper than the sign trick)
//   unsigned  (Q4_1)    maddubs(q, x)
template <class Block>
struct QuantTileAvx2 {
  template <int R, int T>
  LLMCTL_AVX2 static void tile(const TileArgs& a) {
    constexpr size_t kR = static_cast<size_t>(R), kT = static_cast<size_t>(T);
    const int64_t nb = a.n / 32;
    const __m256i ones16 = _mm256_set1_epi16(1);
    __m256 acc[kR][kT];
    for (size_t r = 0; r < kR; ++r)
      for (size_t t = 0; t < kT; ++t) acc[r][t] = _mm256_setzero_ps();
    // Decode streams each weight byte once: the tile's R rows are one contiguous stretch of
    // memory, and so is the next tile's. Prefetch the next tile at the pace this one is read
    // (R * kBytes bytes per block, under two cache lines), so that a new tile does not start
    // with R cold streams the hardware prefetcher has not learned yet.
    const uint8_t* next_tile = a.w + kR * a.w_stride;
    for (int64_t b = 0; b < nb; ++b) {
      if constexpr (T == 1) {
        const char* p =
            reinterpret_cast<const char*>(next_tile) + static_cast<size_t>(b) * kR * Block::kBytes;
        _mm_prefetch(p, _MM_HINT_T0);
        _mm_prefetch(p + 64, _MM_HINT_T0);
      }
      __m256i wq[kR];
      __m256 dw[kR];
      __m256 mw[kR];  // Q4_1's min
      for (size_t r = 0; r < kR; ++r) {
        const uint8_t* blk = a.w + r * a.w_stride + static_cast<size_t>(b) * Block::kBytes;
        wq[r] = Block::weights_avx2(blk);
        dw[r] = _mm256_broadcastss_ps(
            _mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk))));
        if constexpr (Block::kHasMin) mw[r] = _mm256_set1_ps(fp16_to_f32_f16c(blk + 2));
      }
      for (size_t t = 0; t < kT; ++t) {
        const int64_t tb = static_cast<int64_t>(t) * nb + b;
        const __m256i xq = _mm256_loadu_si256(
            reinterpret_cast<const __m256i*>(a.qs + static_cast<int64_t>(t) * a.n + 32 * b));
        const __m256 dx = _mm256_broadcast_ss(a.qd + tb);
        // lane sums of x (Q4_0's offset, Q4_1's min), shared by the tile's rows
        __m256i xsum = _mm256_setzero_si256();
        if constexpr (Block::kOffset8 || Block::kHasMin)
          xsum = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), xq), ones16);
        const __m256i x8 = _mm256_slli_epi32(xsum, 3);
        __m256 xs = _mm256_setzero_ps();
        if constexpr (Block::kHasMin) xs = _mm256_mul_ps(_mm256_cvtepi32_ps(xsum), dx);
        for (size_t r = 0; r < kR; ++r) {
          __m256i p;
          if constexpr (Block::kSigned)
            p = _mm256_maddubs_epi16(_mm256_sign_epi8(wq[r], wq[r]), _mm256_sign_epi8(xq, wq[r]));
          else
            p = _mm256_maddubs_epi16(wq[r], xq);
          __m256i lanes = _mm256_madd_epi16(p, ones16);
          if constexpr (Block::kOffset8) lanes = _mm256_sub_epi32(lanes, x8);
          acc[r][t] =
              _mm256_fmadd_ps(_mm256_cvtepi32_ps(lanes), _mm256_mul_ps(dw[r], dx), acc[r][t]);
          if constexpr (Block::kHasMin) acc[r][t] = _mm256_fmadd_ps(xs, mw[r], acc[r][t]);
        }
      }
    }
    for (size_t t = 0; t < kT; ++t)
      for (size_t r = 0; r < kR; ++r)
        a.out[static_cast<int64_t>(t) * a.out_stride + static_cast<int64_t>(r)] =
            hsum8_avx2(acc[r][t]);
  }
};
#endif

// The MatmulKernel of a block type: AVX2 when asked for (and compiled for x86), else scalar.
template <class Block>
MatmulKernel make_quant_kernel(bool avx2, const char* avx2_name, const char* scalar_name,
                               int rows_decode, int rows_prefill, int tokens_prefill) {
  MatmulKernel k;
  k.quantized = true;
  k.rows_decode = rows_decode;
  k.rows_prefill = rows_prefill;
  k.tokens_prefill = tokens_prefill;
#if defined(LLMCTL_HAVE_X86)
  if (avx2) {
    k.name = avx2_name;
    k.tile = &dispatch_tile<QuantTileAvx2<Block>>;
    return k;
  }
#endif
  (void)avx2;
  (void)avx2_name;
  k.name = scalar_name;
  k.tile = &dispatch_tile<QuantTileScalar<Block>>;
  return k;
}

}  // namespace llmctl::cpu
