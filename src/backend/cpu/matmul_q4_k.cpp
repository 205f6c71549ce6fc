// Q4_K weights (144-byte super-blocks of 256: fp16 d, fp16 dmin, 12 bytes of 6-bit scales and
// mins, 128 bytes of nibbles; w = (d*sc_j) * q - dmin*m_j per 32-element sub-block j) against
// int8 activations: the K-quant tile (matmul_kquant_tile.h), as ggml's vec_dot_q4_K_q8_K but
// with our per-32 activation scales (one fma for the q part, one for the min part per block).
#include "backend/cpu/matmul_kquant_tile.h"

namespace llmctl::cpu {

namespace {

struct KQ4_K {
  static constexpr size_t kBytes = 144;
  static constexpr int kTokens = 8;

  static float scalar_block(const uint8_t* sb, int j, const int8_t* qx, float dx, int32_t xsum,
                            float acc) {
    return q45_k_scalar_block(sb, false, j, qx, dx, xsum, acc);
  }

#if defined(LLMCTL_HAVE_X86)
  static constexpr size_t kPanelBytes = kQ45kPanelBytes;

  // The 8 rows' block (w: 8 step vectors, q in 0..15) against T tokens' 32 activations: each
  // int16 lane of a maddubs is <= 2 * 15 * 127 = 3810 in magnitude, so the 8 steps add up in
  // int16 (<= 30480) before one madd widens them.
  template <int T>
  LLMCTL_AVX2 static void dots(const uint8_t* w, const int8_t* qx, int64_t n, __m256i* isum) {
    for (int s = 0; s < 8; ++s) {
      const __m256i ws = kq_load(w + 32 * s);
      for (int t = 0; t < T; ++t) {
        const __m256i p = _mm256_maddubs_epi16(ws, kq_bcast4(qx + t * n + 4 * s));
        isum[t] = s == 0 ? p : _mm256_add_epi16(isum[t], p);
      }
    }
    for (int t = 0; t < T; ++t) isum[t] = _mm256_madd_epi16(isum[t], _mm256_set1_epi16(1));
  }

  LLMCTL_AVX2 static void pack(const uint8_t* const rows[8], size_t off, uint8_t* p) {
    q45_k_pack_scales(rows, off, p);
    const __m256i low = _mm256_set1_epi8(0x0f);
    for (int c = 0; c < 4; ++c) {  // qs[32c..32c+32): sub-block 2c low nibbles, 2c + 1 high
      __m256i g[8];
      kq_transpose32(rows, off + 16 + 32 * static_cast<size_t>(c), g);
      for (int s = 0; s < 8; ++s) {
        kq_store(p + 256 * (2 * c) + 32 * s, _mm256_and_si256(g[s], low));
        kq_store(p + 256 * (2 * c + 1) + 32 * s, _mm256_and_si256(_mm256_srli_epi16(g[s], 4), low));
      }
    }
  }

  template <int T>
  LLMCTL_AVX2 static void superblock(const uint8_t* p, const TileArgs& a, int64_t sb, __m256* acc) {
    q45_k_superblock<KQ4_K, T>(p, a, sb, acc);
  }
#endif
};

}  // namespace

MatmulKernel matmul_kernel_q4_k(bool avx2) {
  return make_kquant_kernel<KQ4_K>(avx2, "q4_k avx2", "q4_k scalar");
}

}  // namespace llmctl::cpu
