// Q2_K weights (84-byte super-blocks of 256: 16 scale bytes (low nibble sc, high nibble m per
// 16-element sub-block), 64 bytes of 2-bit quants, fp16 d, fp16 dmin; w = (d*sc) * q - dmin*m,
// q in 0..3) against int8 activations: the K-quant tile (matmul_kquant_tile.h) with the record
// of the 16-element sub-block types (matmul_k16_tile.h, with a min). ggml's vec_dot_q2_K_q8_K
// sums sc * (q . x) and m * (sum x) per 16 elements over the super-block against one activation
// scale, as here: one exact integer sum for the q part and one for the min part, then one fma
// each.
#include "backend/cpu/matmul_k16_tile.h"

namespace llmctl::cpu {

namespace {

struct KQ2_K : KQ16Panel<true, 4> {
  static constexpr size_t kBytes = 84;
  static constexpr int kTokens = 6;

  // Per block j: isum_j = sc_2j * sum_{l<16} q x + sc_2j+1 * sum_{l>=16} q x,
  // msum_j = m_2j * sum_{l<16} x + m_2j+1 * sum_{l>=16} x; over the super-block
  // acc = fma(float(sum isum_j), d * d_x, acc), then fma(-float(sum msum_j), dmin * d_x, acc).
  static float scalar_superblock(const uint8_t* sb, const int8_t* qx, float dx, const int32_t* xsum,
                                 float acc) {
    (void)xsum;
    int32_t tot = 0, msum = 0;
    for (int j = 0; j < 8; ++j) {
      int dot[2] = {0, 0}, xs[2] = {0, 0};
      for (int l = 0; l < 32; ++l) {
        dot[l / 16] += q2_k_value(sb, 32 * j + l) * qx[32 * j + l];
        xs[l / 16] += qx[32 * j + l];
      }
      const uint8_t a = sb[2 * j], b = sb[2 * j + 1];
      tot += (a & 0x0f) * dot[0] + (b & 0x0f) * dot[1];
      msum += (a >> 4) * xs[0] + (b >> 4) * xs[1];
    }
    acc = std::fma(static_cast<float>(tot), fp16_to_f32(load_u16_le(sb + 80)) * dx, acc);
    return std::fma(-static_cast<float>(msum), fp16_to_f32(load_u16_le(sb + 82)) * dx, acc);
  }

#if defined(LLMCTL_HAVE_X86)
  // The record's scales: sc_a / sc_b the low nibbles of scale bytes 2j, 2j + 1, o their high
  // nibbles (m); d, dmin.
  LLMCTL_AVX2 static void pack_scales(const uint8_t* const rows[8], size_t off, uint8_t* p) {
    __m256i g[4];  // g[c] lane r: scale bytes 4c..4c+3 of row r (blocks 2c, 2c + 1)
    kq_transpose16(rows, off, g);
    const __m256i nib = _mm256_set1_epi8(0x0f);
    for (int c = 0; c < 4; ++c) {
      const __m256i sc = _mm256_and_si256(g[c], nib);
      const __m256i m = _mm256_and_si256(_mm256_srli_epi16(g[c], 4), nib);
      for (int e = 0; e < 2; ++e) {  // block 2c + e: bytes 2e, 2e + 1 of the dword
        const int j = 2 * c + e;
        kq_store(p + kSaOffset + 32 * j, _mm256_shuffle_epi8(sc, pair_pick(2 * e, 2 * e)));
        kq_store(p + kSbOffset + 32 * j, _mm256_shuffle_epi8(sc, pair_pick(2 * e + 1, 2 * e + 1)));
        kq_store(p + kOffOffset + 32 * j, _mm256_shuffle_epi8(m, pair_pick(2 * e, 2 * e + 1)));
      }
    }
    __m256i gd[4];  // bytes 68..83: d | dmin << 16 is dword 3
    kq_transpose16(rows, off + 68, gd);
    _mm256_storeu_ps(reinterpret_cast<float*>(p + kDOffset), kq_fp16_lanes(gd[3], false));
    _mm256_storeu_ps(reinterpret_cast<float*>(p + kDminOffset), kq_fp16_lanes(gd[3], true));
  }

  // Elements 128h + 32k + l are block 4h + k, bits 2k, 2k + 1 of quant byte 32h + l: step s of
  // block 4h + k from q[s] (the 8 rows' bytes 32h + 4s .. + 3); the 16-bit shift keeps the
  // two bits inside their byte.
  LLMCTL_AVX2 static __m256i weights(__m256i q, int k) {
    return _mm256_and_si256(_mm256_srl_epi16(q, _mm_cvtsi32_si128(2 * k)), _mm256_set1_epi8(3));
  }

  LLMCTL_AVX2 static void pack(const uint8_t* const rows[8], size_t off, uint8_t* p) {
    pack_scales(rows, off, p);
    for (int h = 0; h < 2; ++h) {
      __m256i q[8];
      kq_transpose32(rows, off + 16 + 32 * static_cast<size_t>(h), q);
      for (int k = 0; k < 4; ++k)
        for (int s = 0; s < 8; ++s) kq_store(p + 256 * (4 * h + k) + 32 * s, weights(q[s], k));
    }
  }

  // Decode (one token): the weights straight from registers, the scales through the record;
  // the same integer sums and float steps as pack + superblock<1>, so the same bits.
  static constexpr bool kFusedDecode = true;
  LLMCTL_AVX2 static void decode_superblock(const uint8_t* const rows[8], size_t off,
                                            const TileArgs& a, int64_t sb, __m256* acc) {
    alignas(32) uint8_t p[kPanelBytes];  // only the scales part is written
    pack_scales(rows, off, p);
    __m256i tot = _mm256_setzero_si256(), ms = tot;
    for (int h = 0; h < 2; ++h) {
      __m256i q[8];
      kq_transpose32(rows, off + 16 + 32 * static_cast<size_t>(h), q);
      for (int k = 0; k < 4; ++k) {
        __m256i w[8];
        for (int s = 0; s < 8; ++s) w[s] = weights(q[s], k);
        block_sums(p, 4 * h + k, w, a, sb, 0, tot, ms);
      }
    }
    acc[0] = finish(p, a, sb, 0, tot, ms, acc[0]);
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
