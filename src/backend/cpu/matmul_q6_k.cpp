// Q6_K weights (210-byte super-blocks of 256: 128 bytes of low nibbles ql, 64 bytes of 2-bit
// highs qh, 16 int8 scales, fp16 d; w = (d*sc_s) * (q - 32) per 16-element sub-block s) against
// int8 activations: the K-quant tile (matmul_kquant_tile.h), as ggml's vec_dot_q6_K_q8_K: one
// activation scale per super-block, one exact integer sum, then one fma per super-block. Also the
// AVX-512 and AVX2 kernels over the repacked records (weight_repack.h, matmul_repacked_tile.h,
// matmul_repacked_tile_avx2.h).
#include "backend/cpu/matmul_k16_tile.h"
#include "backend/cpu/matmul_repacked_k16.h"
#include "backend/cpu/weight_repack.h"

namespace llmctl::cpu {

namespace {

struct KQ6_K : KQ16Panel<false, 63> {
  static constexpr size_t kBytes = 210;
  static constexpr int kTokens = 6;

  // Block j: isum_j = sc_2j * sum_{l<16} (q - 32) x + sc_2j+1 * sum_{l>=16} (q - 32) x;
  // acc = fma(float(sum isum_j), d * d_x, acc) over the super-block.
  static float scalar_superblock(const uint8_t* sb, const int8_t* qx, float dx, const int32_t* xsum,
                                 float acc) {
    (void)xsum;
    int32_t tot = 0;
    for (int j = 0; j < 8; ++j) {
      int8_t sc[2];
      std::memcpy(sc, sb + 192 + 2 * j, 2);
      int half[2] = {0, 0};
      for (int l = 0; l < 32; ++l)
        half[l / 16] += (q6_k_value(sb, 32 * j + l) - 32) * qx[32 * j + l];
      tot += sc[0] * half[0] + sc[1] * half[1];
    }
    return std::fma(static_cast<float>(tot), fp16_to_f32(load_u16_le(sb + 208)) * dx, acc);
  }

#if defined(LLMCTL_HAVE_X86)
  // The record of matmul_k16_tile.h: u = q (0..63), sc_a = sc_2j, sc_b = sc_2j+1, o = -32 sc.
  LLMCTL_AVX2 static void pack(const uint8_t* const rows[8], size_t off, uint8_t* p) {
    __m256i g[4];  // g[c] lane r: scales 4c..4c+3 of row r
    kq_transpose16(rows, off + 192, g);
    for (int j = 0; j < 8; ++j) {
      const int sh = 16 * (j % 2);  // scales 2j, 2j+1: bytes sh/8, sh/8 + 1 of dword j/2
      const __m256i sa =
          _mm256_srai_epi32(_mm256_sll_epi32(g[j / 2], _mm_cvtsi32_si128(24 - sh)), 24);
      const __m256i sb =
          _mm256_srai_epi32(_mm256_sll_epi32(g[j / 2], _mm_cvtsi32_si128(16 - sh)), 24);
      const __m256i zero = _mm256_setzero_si256();
      store_scales(p, j, sa, sb, _mm256_sub_epi32(zero, _mm256_slli_epi32(sa, 5)),
                   _mm256_sub_epi32(zero, _mm256_slli_epi32(sb, 5)));
    }
    __m256i gd[4];  // bytes 194..209: d is the high half of dword 3
    kq_transpose16(rows, off + 194, gd);
    _mm256_storeu_ps(reinterpret_cast<float*>(p + kDOffset), kq_fp16_lanes(gd[3], true));
    const __m256i nib = _mm256_set1_epi8(0x0f), top = _mm256_set1_epi8(0x30);
    for (int h = 0; h < 2; ++h) {  // elements 128h + 32k + l: block 4h + k
      __m256i l0[8], l1[8], hb[8];
      kq_transpose32(rows, off + 64 * static_cast<size_t>(h), l0);
      kq_transpose32(rows, off + 64 * static_cast<size_t>(h) + 32, l1);
      kq_transpose32(rows, off + 128 + 32 * static_cast<size_t>(h), hb);
      for (int k = 0; k < 4; ++k)
        for (int s = 0; s < 8; ++s) {
          const __m256i src = k % 2 == 0 ? l0[s] : l1[s];
          const __m256i lo = _mm256_and_si256(k < 2 ? src : _mm256_srli_epi16(src, 4), nib);
          // bits 2k, 2k+1 of qh to bits 4, 5 (the 16-bit shifts keep them inside their byte)
          const __m256i hi =
              _mm256_and_si256(k < 3 ? _mm256_sll_epi16(hb[s], _mm_cvtsi32_si128(4 - 2 * k))
                                     : _mm256_srli_epi16(hb[s], 2),
                               top);
          kq_store(p + 256 * (4 * h + k) + 32 * s, _mm256_or_si256(lo, hi));
        }
    }
  }
#endif
};

#if defined(LLMCTL_HAVE_X86)
LLMCTL_AVX512_BEGIN
// The repacked Q6_K record (weight_repack.h: ql vectors at 0, qh vectors at 1024, int8 scales at
// 1536, d at 1664). Block j = 4 h + k of the super-block takes its low
// nibbles from ql vector row 2 h + k % 2 (k >= 2: the high nibbles) and bits 2 k, 2 k + 1 of qh
// vector row h.
struct RQ6_K : RepackedK16<RQ6_K> {
  using KQ = KQ6_K;
  static constexpr size_t kRecordBytes = kQ6kRecordBytes;
  static constexpr size_t kScalesAt = 1536, kDAt = 1664;
  static constexpr int kOffset = 32;
  static constexpr bool kPairedScales = false;
  // one token block by block: stepping across 4 blocks (as Q3_K) was level (0.98x to 1.00x)
  static constexpr bool kOneTokenAcross = false;

  // Step s of block 4 h + k, 4 weights per row lane: the low nibbles lo and the high bits at
  // bits 4, 5 of hi (other bits of hi not masked); q = lo | (hi & 0x30), 0..63.
  LLMCTL_AVX2 static void parts(const uint8_t* rec, int h, int k, int s, __m256i& lo, __m256i& hi) {
    const __m256i l = kq_load(rec + 32 * (8 * (2 * h + k % 2) + s));
    const __m256i hb = kq_load(rec + 1024 + 32 * (8 * h + s));
    lo = _mm256_and_si256(k < 2 ? l : _mm256_srli_epi16(l, 4), _mm256_set1_epi8(0x0f));
    // bits 2 k, 2 k + 1 of qh to bits 4, 5
    hi = k == 0   ? _mm256_slli_epi16(hb, 4)
         : k == 1 ? _mm256_slli_epi16(hb, 2)
         : k == 2 ? hb
                  : _mm256_srli_epi16(hb, 2);
  }
  LLMCTL_AVX2 static __m256i weight(const uint8_t* rec, int h, int k, int s) {
    __m256i lo, hi;
    parts(rec, h, k, s, lo, hi);
    return _mm256_or_si256(lo, _mm256_and_si256(hi, _mm256_set1_epi8(0x30)));
  }
  LLMCTL_AVX2 static void weights(const uint8_t* rec, int h, int s, __m256i w[4]) {
    for (int k = 0; k < 4; ++k) w[k] = weight(rec, h, k, s);
  }
  // The AVX-512 prefill's pack (RepackedTile::pack16): weights(), k = 0..3, of two records at
  // once (rec0 in the low 256 bits), the mask and the or in one vpternlogd.
  static constexpr bool kPackWide = true;
  LLMCTL_AVX512 static void weights512(const uint8_t* rec0, const uint8_t* rec1, int h, int s,
                                       __m512i w[4]) {
    const auto at = [](int vec) { return 32 * static_cast<size_t>(vec); };
    const __m512i l0 = rp_both_groups(rec0, rec1, at(8 * (2 * h) + s));
    const __m512i l1 = rp_both_groups(rec0, rec1, at(8 * (2 * h + 1) + s));
    const __m512i hb = rp_both_groups(rec0, rec1, 1024 + at(8 * h + s));
    const __m512i low = _mm512_set1_epi8(0x0f), top = _mm512_set1_epi8(0x30);
    // lo | (hi & top), ternlog truth table 0xf8; hi: bits 2 k, 2 k + 1 of qh at bits 4, 5
    w[0] =
        _mm512_ternarylogic_epi32(_mm512_and_si512(l0, low), _mm512_slli_epi16(hb, 4), top, 0xf8);
    w[1] =
        _mm512_ternarylogic_epi32(_mm512_and_si512(l1, low), _mm512_slli_epi16(hb, 2), top, 0xf8);
    w[2] =
        _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(l0, 4), low), hb, top, 0xf8);
    w[3] = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(l1, 4), low),
                                     _mm512_srli_epi16(hb, 2), top, 0xf8);
  }
  // The AVX-512 decode's: the same values, the mask and the or in one vpternlogd.
  LLMCTL_AVX512 static __m256i decode_weight(const uint8_t* rec, int h, int k, int s) {
    __m256i lo, hi;
    parts(rec, h, k, s, lo, hi);
    return _mm256_ternarylogic_epi32(lo, hi, _mm256_set1_epi8(0x30), 0xf8);  // lo | (hi & top)
  }
};
LLMCTL_AVX512_END
#else
struct RQ6_K;  // x86 only: the kernels' factories give none elsewhere
#endif

}  // namespace

MatmulKernel matmul_kernel_q6_k(bool avx2) {
  return make_kquant_kernel<KQ6_K>(avx2, "q6_k avx2", "q6_k scalar");
}

MatmulKernel matmul_kernel_q6_k_avx512() {
  return make_paired_kernel_avx512<KQuantUnit, KQ6_K>("q6_k avx512-vnni (decode avx2)");
}

MatmulKernel matmul_kernel_q6_k_repacked() {  // half_sums: KQ6_K's (set_kquant_activations)
  return make_repacked_kernel_avx512<RQ6_K>("q6_k avx512-vnni repacked-x8");
}

MatmulKernel matmul_kernel_q6_k_repacked_avx2() {
  return make_repacked_kernel_avx2<RQ6_K>("q6_k avx2 repacked-x8");
}

}  // namespace llmctl::cpu
