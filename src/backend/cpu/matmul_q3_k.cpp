// Q3_K weights (110-byte super-blocks of 256: 32 bytes of high bits hmask, 64 bytes of 2-bit
// low quants, 12 bytes of 6-bit scales, fp16 d; w = (d*(sc - 32)) * q, q in -4..3 per
// 16-element sub-block) against int8 activations: the K-quant tile (matmul_kquant_tile.h) with
// the record of the 16-element sub-block types (matmul_k16_tile.h, as Q6_K). ggml's
// vec_dot_q3_K_q8_K sums (sc - 32) * (q . x) per 16 elements against one activation scale per
// super-block, as here: one exact integer sum per super-block, then one fma. The kernels multiply u
// = q + 4 (0..7, unsigned for maddubs / vpdpbusd) and take the 4 back through the halves'
// activation sums.
#include "backend/cpu/matmul_k16_tile.h"
#include "backend/cpu/matmul_repacked_k16.h"
#include "backend/cpu/weight_repack.h"

namespace llmctl::cpu {

namespace {

struct KQ3_K : KQ16Panel<false, 7> {
  static constexpr size_t kBytes = 110;
  static constexpr int kTokens = 6;

  // Block j: isum_j = (sc_2j - 32) * sum_{l<16} q x + (sc_2j+1 - 32) * sum_{l>=16} q x;
  // acc = fma(float(sum isum_j), d * d_x, acc) over the super-block.
  static float scalar_superblock(const uint8_t* sb, const int8_t* qx, float dx, const int32_t* xsum,
                                 float acc) {
    (void)xsum;
    int32_t tot = 0;
    for (int j = 0; j < 8; ++j) {
      int half[2] = {0, 0};
      for (int l = 0; l < 32; ++l) half[l / 16] += q3_k_value(sb, 32 * j + l) * qx[32 * j + l];
      tot += (q3_k_scale(sb, 2 * j) - 32) * half[0] + (q3_k_scale(sb, 2 * j + 1) - 32) * half[1];
    }
    return std::fma(static_cast<float>(tot), fp16_to_f32(load_u16_le(sb + 108)) * dx, acc);
  }

#if defined(LLMCTL_HAVE_X86)
  // The record's scales: sc_a / sc_b = sc - 32 of sub-blocks 2j, 2j + 1, o = -4 (sc - 32); d.
  LLMCTL_AVX2 static void pack_scales(const uint8_t* const rows[8], size_t off, uint8_t* p) {
    __m256i g[4];  // bytes 92..107: g[1], g[2], g[3] the scale bytes 0..3, 4..7, 8..11
    kq_transpose16(rows, off + 92, g);
    // sc[c] byte k: scale 4c + k (0..63): low 4 bits from bytes 0..7 (scales 0..7: low
    // nibbles, 8..15: high nibbles), high 2 bits from bits 2c, 2c+1 of byte 8 + k
    const __m256i m4 = _mm256_set1_epi8(0x0f), top = _mm256_set1_epi8(0x30);
    const __m256i sc[4] = {
        _mm256_or_si256(_mm256_and_si256(g[1], m4),
                        _mm256_and_si256(_mm256_slli_epi32(g[3], 4), top)),
        _mm256_or_si256(_mm256_and_si256(g[2], m4),
                        _mm256_and_si256(_mm256_slli_epi32(g[3], 2), top)),
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(g[1], 4), m4),
                        _mm256_and_si256(g[3], top)),
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(g[2], 4), m4),
                        _mm256_and_si256(_mm256_srli_epi32(g[3], 2), top))};
    const __m256i bias = _mm256_set1_epi16(32), o_bias = _mm256_set1_epi16(128);
    for (int j = 0; j < 8; ++j) {  // scales 2j, 2j + 1: bytes 2e, 2e + 1 of sc[j / 2]
      const int e = j % 2;
      const __m256i v = sc[j / 2];
      kq_store(p + kSaOffset + 32 * j,
               _mm256_sub_epi16(_mm256_shuffle_epi8(v, pair_pick(2 * e, 2 * e)), bias));
      kq_store(p + kSbOffset + 32 * j,
               _mm256_sub_epi16(_mm256_shuffle_epi8(v, pair_pick(2 * e + 1, 2 * e + 1)), bias));
      // -4 (sc - 32) = 128 - 4 sc
      kq_store(p + kOffOffset + 32 * j,
               _mm256_sub_epi16(o_bias, _mm256_slli_epi16(
                                            _mm256_shuffle_epi8(v, pair_pick(2 * e, 2 * e + 1)), 2)));
    }
    __m256i gd[4];  // bytes 94..109: d is the high half of dword 3
    kq_transpose16(rows, off + 94, gd);
    _mm256_storeu_ps(reinterpret_cast<float*>(p + kDOffset), kq_fp16_lanes(gd[3], true));
  }

  // u = q + 4 = low bits | high bit << 2 of element 128h + 32k + l (block 4h + k): low bits
  // 2k, 2k + 1 of quant byte 32h + l (q: the 8 rows' bytes of step s), the high bit bit 4h + k
  // of hmask byte l (hm); the 16-bit shifts keep the bits inside their byte.
  LLMCTL_AVX2 static __m256i weights(__m256i q, __m256i hm, int h, int k) {
    const int bit = 4 * h + k;  // to bit 2: one shift, left or right
    const __m256i lo =
        _mm256_and_si256(_mm256_srl_epi16(q, _mm_cvtsi32_si128(2 * k)), _mm256_set1_epi8(3));
    const __m256i moved = bit < 2 ? _mm256_sll_epi16(hm, _mm_cvtsi32_si128(2 - bit))
                                  : _mm256_srl_epi16(hm, _mm_cvtsi32_si128(bit - 2));
    return _mm256_or_si256(lo, _mm256_and_si256(moved, _mm256_set1_epi8(4)));
  }

  LLMCTL_AVX2 static void pack(const uint8_t* const rows[8], size_t off, uint8_t* p) {
    pack_scales(rows, off, p);
    __m256i hm[8];  // hmask
    kq_transpose32(rows, off, hm);
    for (int h = 0; h < 2; ++h) {
      __m256i q[8];
      kq_transpose32(rows, off + 32 + 32 * static_cast<size_t>(h), q);
      for (int k = 0; k < 4; ++k)
        for (int s = 0; s < 8; ++s)
          kq_store(p + 256 * (4 * h + k) + 32 * s, weights(q[s], hm[s], h, k));
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
    __m256i hm[8];
    kq_transpose32(rows, off, hm);
    for (int h = 0; h < 2; ++h) {
      __m256i q[8];
      kq_transpose32(rows, off + 32 + 32 * static_cast<size_t>(h), q);
      for (int k = 0; k < 4; ++k) {
        __m256i w[8];
        for (int s = 0; s < 8; ++s) w[s] = weights(q[s], hm[s], h, k);
        block_sums(p, 4 * h + k, w, a, sb, 0, tot, ms);
      }
    }
    acc[0] = finish(p, a, sb, 0, tot, ms, acc[0]);
  }
#endif
};

#if defined(LLMCTL_HAVE_X86)
LLMCTL_AVX512_BEGIN
// The repacked Q3_K record (weight_repack.h: qs vectors at 0, hmask vectors at 512, int8 scales
// minus 32 at 768 in pairs by block and row, d at 896). Step s of block j = 4 h + k reads qs vector
// (h, s) and hmask vector s: the registers KQ3_K::decode_superblock builds by transposing 8 rows.
struct RQ3_K : RepackedK16<RQ3_K> {
  using KQ = KQ3_K;
  static constexpr size_t kRecordBytes = kQ3kRecordBytes;
  static constexpr size_t kScalesAt = 768, kDAt = 896;
  static constexpr int kOffset = 4;
  static constexpr bool kPairedScales = true;
  // one token: step s of 4 blocks from one load of q and hmask, 8 sums in flight; block by
  // block it decoded 1.03x to 1.08x slower on one thread, 1.02x to 1.05x on two (from memory)
  static constexpr bool kOneTokenAcross = true;

  LLMCTL_AVX2 static __m256i weight(const uint8_t* rec, int h, int k, int s) {
    return KQ::weights(kq_load(rec + 32 * (8 * h + s)), kq_load(rec + 512 + 32 * s), h, k);
  }
  LLMCTL_AVX2 static void weights(const uint8_t* rec, int h, int s, __m256i w[4]) {
    const __m256i q = kq_load(rec + 32 * (8 * h + s)), hm = kq_load(rec + 512 + 32 * s);
    for (int k = 0; k < 4; ++k) w[k] = KQ::weights(q, hm, h, k);
  }

  // The AVX-512 decode leaves blocks k = 0..2 where their low bits sit: u 4^k = (q & 3 << 2k) |
  // the high bit moved to 2k + 2 (at most 112); block 3 as 4 u = (q >> 4 & 0xc) | the high bit
  // at 4 (its bits 6, 7 cannot stay: 4^3 u overflows a byte). A mask, a shift of hmask (none for
  // h = 1, k = 2) and one vpternlogd (lo | hm & bit), where weight() takes two shifts, two masks
  // and an or.
  static constexpr int decode_shift(int k) { return k == 3 ? 2 : 2 * k; }
  LLMCTL_AVX512 static __m256i decode_weight(const uint8_t* rec, int h, int k, int s) {
    const __m256i q = kq_load(rec + 32 * (8 * h + s)), hm = kq_load(rec + 512 + 32 * s);
    const int at = k == 3 ? 4 : 2 * k + 2;  // where the high bit goes
    const int move = at - (4 * h + k);      // within the byte: 16-bit shifts leak nothing in
    const __m256i lo = k == 3
                           ? _mm256_and_si256(_mm256_srli_epi16(q, 4), _mm256_set1_epi8(0x0c))
                           : _mm256_and_si256(q, _mm256_set1_epi8(static_cast<char>(3 << (2 * k))));
    const __m256i hi = move > 0   ? _mm256_slli_epi16(hm, move)
                       : move < 0 ? _mm256_srli_epi16(hm, -move)
                                  : hm;
    return _mm256_ternarylogic_epi32(lo, hi, _mm256_set1_epi8(static_cast<char>(1 << at)),
                                     0xf8);  // lo | (hi & bit)
  }
};
LLMCTL_AVX512_END
#else
struct RQ3_K;  // x86 only: the kernels' factories give none elsewhere
#endif

}  // namespace

MatmulKernel matmul_kernel_q3_k(bool avx2) {
  return make_kquant_kernel<KQ3_K>(avx2, "q3_k avx2", "q3_k scalar");
}

MatmulKernel matmul_kernel_q3_k_avx512() {
  return make_paired_kernel_avx512<KQuantUnit, KQ3_K>("q3_k avx512-vnni (decode avx2)");
}

MatmulKernel matmul_kernel_q3_k_repacked() {  // half_sums: KQ3_K's (set_kquant_activations)
  return make_repacked_kernel_avx512<RQ3_K>("q3_k avx512-vnni repacked-x8");
}

MatmulKernel matmul_kernel_q3_k_repacked_avx2() {
  return make_repacked_kernel_avx2<RQ3_K>("q3_k avx2 repacked-x8");
}

}  // namespace llmctl::cpu
