#pragma once
// Internal to the matmul fast path: the tile kernel for block-quantized weights (Q8_0, Q4_0,
// Q4_1) against int8 activations (quantize_activations.h), written once over a block trait:
//
//   Block::kBytes                     bytes per 32-element block
//   Block::kSigned                    weights are signed int8 (Q8_0, Q4_0: q - 8) or unsigned
//                                     nibbles (Q4_1, whose min m adds m * d_x * sum(q_x))
//   (every block starts with fp16 d; Q4_1's fp16 m follows it at byte 2)
//   Block::weights(blk, int q[32])    (scalar) the 32 integer weights
//   Block::weights_avx2(blk)          (AVX2) the 32 integer weights as bytes
//
// Per pair (r, t) and block b (matmul_kernels.h): lane k += float(isum_k) * (d_w * d_x);
// unsigned blocks also run min_acc = fma(m_w, qsum_x[b], min_acc); out = hsum8(lanes)
// (+ min_acc). The integer sums are exact (|q_w| <= 128, |q_x| <= 127), so the AVX2 and the
// scalar kernel agree bit for bit.

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
        float min_acc = 0.0f;
        for (int64_t b = 0; b < nb; ++b) {
          const uint8_t* blk = row + static_cast<size_t>(b) * Block::kBytes;
          int qw[32];
          Block::weights(blk, qw);
          const float dd = fp16_to_f32(load_u16_le(blk)) * a.qd[t * nb + b];
          lanes_block_scalar(qw, a.qs + t * a.n + 32 * b, dd, lanes);
          if constexpr (!Block::kSigned)
            min_acc = std::fma(fp16_to_f32(load_u16_le(blk + 2)), a.qsum[t * nb + b], min_acc);
        }
        float v = hsum8_scalar(lanes);
        if constexpr (!Block::kSigned) v += min_acc;
        a.out[t * a.out_stride + r] = v;
      }
    }
  }
};

#if defined(LLMCTL_HAVE_X86)
template <class Block>
struct QuantTileAvx2 {
  template <int R, int T>
  LLMCTL_AVX2 static void tile(const TileArgs& a) {
    constexpr size_t kR = static_cast<size_t>(R), kT = static_cast<size_t>(T);
    const int64_t nb = a.n / 32;
    __m256 acc[kR][kT];
    float min_acc[kR][kT];
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) {
        acc[r][t] = _mm256_setzero_ps();
        min_acc[r][t] = 0.0f;
      }
    for (int64_t b = 0; b < nb; ++b) {
      __m256i wu[kR], ws[kR];  // |q_w| as unsigned bytes; q_w for the sign of x
      float dw[kR], mw[kR];
      for (int r = 0; r < R; ++r) {
        const uint8_t* blk =
            a.w + static_cast<size_t>(r) * a.w_stride + static_cast<size_t>(b) * Block::kBytes;
        const __m256i q = Block::weights_avx2(blk);
        dw[r] = fp16_to_f32_f16c(blk);
        if constexpr (Block::kSigned) {
          wu[r] = _mm256_sign_epi8(q, q);
          ws[r] = q;
        } else {
          wu[r] = q;
          mw[r] = fp16_to_f32_f16c(blk + 2);
        }
      }
      for (int t = 0; t < T; ++t) {
        const __m256i xq =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs + t * a.n + 32 * b));
        const float dx = a.qd[t * nb + b];
        for (int r = 0; r < R; ++r) {
          __m256 p;
          if constexpr (Block::kSigned)
            p = dot_lanes_avx2(wu[r], _mm256_sign_epi8(xq, ws[r]));
          else
            p = dot_lanes_avx2(wu[r], xq);
          acc[r][t] = _mm256_fmadd_ps(p, _mm256_set1_ps(dw[r] * dx), acc[r][t]);
          if constexpr (!Block::kSigned)
            min_acc[r][t] = _mm_cvtss_f32(_mm_fmadd_ss(
                _mm_set_ss(mw[r]), _mm_set_ss(a.qsum[t * nb + b]), _mm_set_ss(min_acc[r][t])));
        }
      }
    }
    for (int t = 0; t < T; ++t)
      for (int r = 0; r < R; ++r) {
        float v = hsum8_avx2(acc[r][t]);
        if constexpr (!Block::kSigned) v += min_acc[r][t];
        a.out[t * a.out_stride + r] = v;
      }
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
