// Q5_K weights (176-byte super-blocks of 256: Q4_K's fp16 d, dmin and 12 scale bytes, 32 bytes
// of fifth bits qh, 128 bytes of nibbles; w = (d*sc_j) * q - dmin*m_j, q in 0..31) against
// int8 activations: the K-quant tile (matmul_kquant_tile.h) with Q4_K's scales and
// arithmetic, as ggml's vec_dot_q5_K_q8_K but with our per-32 activation scales.
#include "backend/cpu/matmul_kquant_tile.h"

namespace llmctl::cpu {

namespace {

struct KQ5_K {
  static constexpr size_t kBytes = 176;
  static constexpr int kTokens = 6;

  static float scalar_block(const uint8_t* sb, int j, const int8_t* qx, float dx, int32_t xsum,
                            float acc) {
    return q45_k_scalar_block(sb, true, j, qx, dx, xsum, acc);
  }

#if defined(LLMCTL_HAVE_X86)
  static constexpr size_t kPanelBytes = kQ45kPanelBytes;

  // The 8 rows' block (q in 0..31) against T tokens' 32 activations: a maddubs lane is
  // <= 2 * 31 * 127 = 7874 in magnitude, so 4 steps add up in int16 (<= 31496) before a madd
  // widens them.
  template <int T>
  LLMCTL_AVX2 static void dots(const uint8_t* w, const int8_t* qx, int64_t n, __m256i* isum) {
    const __m256i ones = _mm256_set1_epi16(1);
    for (int g = 0; g < 8; g += 4) {
      __m256i p[static_cast<size_t>(T)];
      for (int s = g; s < g + 4; ++s) {
        const __m256i ws = kq_load(w + 32 * s);
        for (int t = 0; t < T; ++t) {
          const __m256i m = _mm256_maddubs_epi16(ws, kq_bcast4(qx + t * n + 4 * s));
          p[t] = s == g ? m : _mm256_add_epi16(p[t], m);
        }
      }
      for (int t = 0; t < T; ++t) {
        const __m256i wide = _mm256_madd_epi16(p[t], ones);
        isum[t] = g == 0 ? wide : _mm256_add_epi32(isum[t], wide);
      }
    }
  }

  LLMCTL_AVX2 static void pack(const uint8_t* const rows[8], size_t off, uint8_t* p) {
    q45_k_pack_scales(rows, off, p);
    __m256i hb[8];  // qh: bit j of byte l is bit 4 of sub-block j's element l
    kq_transpose32(rows, off + 16, hb);
    const __m256i low = _mm256_set1_epi8(0x0f), bit4 = _mm256_set1_epi8(0x10);
    for (int c = 0; c < 4; ++c) {  // qs[32c..32c+32): sub-block 2c low nibbles, 2c + 1 high
      __m256i g[8];
      kq_transpose32(rows, off + 48 + 32 * static_cast<size_t>(c), g);
      for (int half = 0; half < 2; ++half) {
        const int j = 2 * c + half;
        // bit j to bit 4 (the 16-bit shifts keep it inside its byte)
        const __m128i sh = _mm_cvtsi32_si128(j <= 4 ? 4 - j : j - 4);
        for (int s = 0; s < 8; ++s) {
          const __m256i lo = _mm256_and_si256(half == 0 ? g[s] : _mm256_srli_epi16(g[s], 4), low);
          const __m256i hi = _mm256_and_si256(
              j <= 4 ? _mm256_sll_epi16(hb[s], sh) : _mm256_srl_epi16(hb[s], sh), bit4);
          kq_store(p + 256 * j + 32 * s, _mm256_or_si256(lo, hi));
        }
      }
    }
  }

  template <int T>
  LLMCTL_AVX2 static void superblock(const uint8_t* p, const TileArgs& a, int64_t sb, __m256* acc) {
    q45_k_superblock<KQ5_K, T>(p, a, sb, acc);
  }
#endif
};

}  // namespace

MatmulKernel matmul_kernel_q5_k(bool avx2) {
  return make_kquant_kernel<KQ5_K>(avx2, "q5_k avx2", "q5_k scalar");
}

}  // namespace llmctl::cpu
