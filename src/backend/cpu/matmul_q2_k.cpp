// Q2_K weights (84-byte super-blocks of 256: 16 scale bytes (low nibble sc, high nibble m per
// 16-element sub-block), 64 bytes of 2-bit quants, fp16 d, fp16 dmin; w = (d*sc) * q - dmin*m,
// q in 0..3) against int8 activations: the K-quant tile (matmul_kquant_tile.h) with the record
// of the 16-element sub-block types (matmul_k16_tile.h, with a min). ggml's vec_dot_q2_K_q8_K
// sums sc * (q . x) and m * (sum x) per 16 elements over the super-block against one activation
// scale; with our per-32 activation scales, each 32-element block's two sub-blocks fold into
// one exact integer sum for the q part and one for the min part, then one fma each.
#include "backend/cpu/matmul_k16_tile.h"

namespace llmctl::cpu {

namespace {

struct KQ2_K : KQ16Panel<true> {
  static constexpr size_t kBytes = 84;
  static constexpr int kTokens = 6;

  // Block j: isum = sc_2j * sum_{l<16} q x + sc_2j+1 * sum_{l>=16} q x,
  // msum = m_2j * sum_{l<16} x + m_2j+1 * sum_{l>=16} x;
  // acc = fma(float(isum), d * d_x, acc), then fma(-float(msum), dmin * d_x, acc).
  static float scalar_block(const uint8_t* sb, int j, const int8_t* qx, float dx, int32_t xsum,
                            float acc) {
    (void)xsum;
    int dot[2] = {0, 0}, xs[2] = {0, 0};
    for (int l = 0; l < 32; ++l) {
      dot[l / 16] += q2_k_value(sb, 32 * j + l) * qx[l];
      xs[l / 16] += qx[l];
    }
    const uint8_t a = sb[2 * j], b = sb[2 * j + 1];
    const int isum = (a & 0x0f) * dot[0] + (b & 0x0f) * dot[1];
    const int msum = (a >> 4) * xs[0] + (b >> 4) * xs[1];
    acc = std::fma(static_cast<float>(isum), fp16_to_f32(load_u16_le(sb + 80)) * dx, acc);
    return std::fma(-static_cast<float>(msum), fp16_to_f32(load_u16_le(sb + 82)) * dx, acc);
  }

#if defined(LLMCTL_HAVE_X86)
  // u = q, sc_a / sc_b the low nibbles of scale bytes 2j, 2j + 1, o their high nibbles (m).
  LLMCTL_AVX2 static void pack(const uint8_t* const rows[8], size_t off, uint8_t* p) {
    __m256i g[4];  // g[c] lane r: scale bytes 4c..4c+3 of row r
    kq_transpose16(rows, off, g);
    const __m256i nib = _mm256_set1_epi32(0x0f);
    for (int j = 0; j < 8; ++j) {  // bytes 2j, 2j + 1: bytes 2 (j % 2), + 1 of dword j / 2
      const __m256i v = _mm256_srl_epi32(g[j / 2], _mm_cvtsi32_si128(16 * (j % 2)));
      store_scales(p, j, _mm256_and_si256(v, nib), _mm256_and_si256(_mm256_srli_epi32(v, 8), nib),
                   _mm256_and_si256(_mm256_srli_epi32(v, 4), nib),
                   _mm256_and_si256(_mm256_srli_epi32(v, 12), nib));
    }
    __m256i gd[4];  // bytes 68..83: d | dmin << 16 is dword 3
    kq_transpose16(rows, off + 68, gd);
    _mm256_storeu_ps(reinterpret_cast<float*>(p + kDOffset), kq_fp16_lanes(gd[3], false));
    _mm256_storeu_ps(reinterpret_cast<float*>(p + kDminOffset), kq_fp16_lanes(gd[3], true));
    const __m256i two = _mm256_set1_epi8(0x03);
    for (int h = 0; h < 2; ++h) {  // elements 128h + 32k + l: block 4h + k, bits 2k of byte l
      __m256i q[8];
      kq_transpose32(rows, off + 16 + 32 * static_cast<size_t>(h), q);
      for (int k = 0; k < 4; ++k)
        for (int s = 0; s < 8; ++s)  // the 16-bit shift keeps bits 2k, 2k+1 inside their byte
          kq_store(p + 256 * (4 * h + k) + 32 * s,
                   _mm256_and_si256(_mm256_srl_epi16(q[s], _mm_cvtsi32_si128(2 * k)), two));
    }
  }
#endif
};

}  // namespace

MatmulKernel matmul_kernel_q2_k(bool avx2) {
  return make_kquant_kernel<KQ2_K>(avx2, "q2_k avx2", "q2_k scalar");
}

MatmulKernel matmul_kernel_q2_k_avx512() {
  return make_paired_kernel_avx512<KQuantUnit, KQ2_K>("q2_k avx512-vnni (decode avx2)");
}

}  // namespace llmctl::cpu
