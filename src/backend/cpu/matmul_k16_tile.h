#pragma once
// Internal to the matmul fast path: the part of the K-quant tile trait (matmul_kquant_tile.h)
// that the types with 16-element sub-blocks share: Q2_K, Q3_K and Q6_K. Block j (32
// activations) of a super-block covers their sub-blocks 2j (elements 0..15, "a") and 2j + 1
// ("b"), each with its own integer scale. Each type writes its weights as unsigned u and its
// scales into one panel record layout (its pack); the products and the float steps here are
// common. Against activations with one scale d_x per super-block (kActivationGroup, as ggml's
// Q8_K), per super-block:
//   isum_j = sc_a * sum_{l<16} u x + sc_b * sum_{l>=16} u x    (+ o_j  without min)
//   o_j    = o_a * xa + o_b * xb
//   tot    = sum_j isum_j,  msum = sum_j o_j                     (with min)
//   acc    = fma(float(tot), d * d_x, acc);   with min: acc = fma(-float(msum), dmin * d_x, acc)
// xa, xb the sums of block j's two halves of int8 activations. Without a min, o folds the
// offset of u into the integer sum (Q6_K u = q, o = -32 sc; Q3_K u = q + 4, o = -4 sc); with a
// min (Q2_K), o is the sub-block's min m. All integer sums are exact in int32 (Q6_K: |tot| <=
// 8 * 2 * 128 * 16 * 32 * 127 < 2^28), so how the kernels form them does not change a bit; the
// float steps come once per super-block, not once per block.
#include "backend/cpu/matmul_paired_tile_avx512.h"

namespace llmctl::cpu {

// kMaxU: the largest unsigned weight u (Q2_K 3, Q3_K 7, Q6_K 63); what fits int16 follows.
// kGroup: maddubs steps (4 weights x 4 activations) added in int16 before a madd widens them:
// a maddubs lane is at most 2 * kMaxU * 127 in magnitude, so Q6_K (16002) adds 2 steps, Q2_K
// and Q3_K (1778) all 4 steps of a sub-block.
template <bool kHasMin, int kMaxU>
struct KQ16Panel {
  static constexpr int kGroup = 4 * 2 * kMaxU * 127 <= 32767 ? 4 : 2;
  static_assert(2 * 2 * kMaxU * 127 <= 32767, "two maddubs steps fit int16");
  // The kernels read the halves' sums from TileArgs::qhalf (computed once per token).
  static constexpr bool kHalfSums = true;
  static constexpr int kActivationGroup = 256;  // one activation scale per super-block
#if defined(LLMCTL_HAVE_X86)
  // Panel record (8 rows, one super-block):
  //   w[8][8]  at 256 j + 32 s: block j, weights 4s..4s+3 of rows 0..7, u unsigned
  //   sa[8]    at 2048 + 32 j: per row the int16 pair (sc_a, sc_a), sb[8] at 2304: sc_b
  //   off[8]   at 2560 + 32 j: per row the int16 pair (o_a, o_b)
  //   d        at 2816: 8 floats;  dmin at 2848: 8 floats (kHasMin)
  static constexpr size_t kSaOffset = 2048, kSbOffset = 2304, kOffOffset = 2560, kDOffset = 2816,
                          kDminOffset = 2848;
  static constexpr size_t kPanelBytes = kHasMin ? 2880 : 2848;

  // Block j's scales of the 8 rows (int32 lanes, each within int16) into the record.
  LLMCTL_AVX2 static void store_scales(uint8_t* p, int j, __m256i sa, __m256i sb, __m256i oa,
                                       __m256i ob) {
    const __m256i low16 = _mm256_set1_epi32(0xffff);
    kq_store(p + kSaOffset + 32 * j,
             _mm256_or_si256(_mm256_and_si256(sa, low16), _mm256_slli_epi32(sa, 16)));
    kq_store(p + kSbOffset + 32 * j,
             _mm256_or_si256(_mm256_and_si256(sb, low16), _mm256_slli_epi32(sb, 16)));
    kq_store(p + kOffOffset + 32 * j, _mm256_blend_epi16(oa, _mm256_slli_epi32(ob, 16), 0xaa));
  }

  // A shuffle_epi8 control that makes each dword of a vector the int16 pair (byte b0, byte
  // b1) of that dword (unsigned, b0 and b1 in 0..3): how the types read a pair of 8-bit
  // scales into the record.
  LLMCTL_AVX2 static __m256i pair_pick(int b0, int b1) {
    const __m256i dword = _mm256_setr_epi32(0, 0x04040404, 0x08080808, 0x0c0c0c0c, 0, 0x04040404,
                                            0x08080808, 0x0c0c0c0c);  // + 4 i (0x80 stays set)
    const uint32_t pick = static_cast<uint32_t>(b0) | 0x8000u | static_cast<uint32_t>(b1) << 16 |
                          0x80000000u;  // 0x80: a zero byte
    return _mm256_add_epi8(_mm256_set1_epi32(static_cast<int32_t>(pick)), dword);
  }

  // The 8 rows' block (weights w[s] of step s) against 32 activations, without the o term:
  // sum_s sc * u * x, kGroup steps in int16, then a madd with the sub-block's scale (steps
  // 0..3: sc_a, 4..7: sc_b). (w is an array of registers: a record in memory may be 16-byte
  // aligned only, and a __m256i_u template argument would lose its alignment attribute.)
  LLMCTL_AVX2 static __m256i dot(const __m256i w[8], const int8_t* qx, __m256i sa, __m256i sb) {
    __m256i sum = _mm256_setzero_si256();
    for (int g = 0; g < 8; g += kGroup) {
      __m256i p = _mm256_maddubs_epi16(w[g], kq_bcast4(qx + 4 * g));
      for (int s = g + 1; s < g + kGroup; ++s)
        p = _mm256_add_epi16(p, _mm256_maddubs_epi16(w[s], kq_bcast4(qx + 4 * s)));
      const __m256i wide = _mm256_madd_epi16(p, g < 4 ? sa : sb);
      sum = g == 0 ? wide : _mm256_add_epi32(sum, wide);
    }
    return sum;
  }

  // Per block of the super-block: xa | xb << 16, int16 each (|sum| <= 16 * 127), the operand
  // of the o term's madd with off[j]: activation_half_sums's values (TileArgs::qhalf).
  LLMCTL_AVX2 static void half_sums(const int8_t* qx, int32_t out[8]) {
    const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    __m256i m[8];
    for (int i = 0; i < 8; ++i)
      m[i] = _mm256_madd_epi16(
          _mm256_maddubs_epi16(ones8, kq_load(reinterpret_cast<const uint8_t*>(qx) + 32 * i)),
          ones16);  // lanes 0..3: parts of block i's first half, 4..7: its second half
    // hadd twice: low 128 bits the first halves of 4 blocks, high 128 bits their second halves
    const __m256i lo =
        _mm256_hadd_epi32(_mm256_hadd_epi32(m[0], m[1]), _mm256_hadd_epi32(m[2], m[3]));
    const __m256i hi =
        _mm256_hadd_epi32(_mm256_hadd_epi32(m[4], m[5]), _mm256_hadd_epi32(m[6], m[7]));
    const __m256i first = _mm256_permute2x128_si256(lo, hi, 0x20);
    const __m256i second = _mm256_permute2x128_si256(lo, hi, 0x31);
    const __m256i pairs = _mm256_blend_epi16(first, _mm256_slli_epi32(second, 16), 0xaa);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), pairs);
  }

  // Token t's block j (weights w in registers, the record p's scales) added to the
  // super-block's integer sums: tot (isum_j, + o_j without a min) and ms (o_j, with a min).
  LLMCTL_AVX2 static void block_sums(const uint8_t* p, int j, const __m256i w[8], const TileArgs& a,
                                     int64_t sbi, int t, __m256i& tot, __m256i& ms) {
    const int64_t nb = a.n / 32, b = 8 * sbi + j;
    const __m256i xo =
        _mm256_madd_epi16(_mm256_set1_epi32(a.qhalf[t * nb + b]), kq_load(p + kOffOffset + 32 * j));
    __m256i isum = dot(w, a.qs + t * a.n + 32 * b, kq_load(p + kSaOffset + 32 * j),
                       kq_load(p + kSbOffset + 32 * j));
    if constexpr (kHasMin)
      ms = _mm256_add_epi32(ms, xo);
    else
      isum = _mm256_add_epi32(isum, xo);
    tot = _mm256_add_epi32(tot, isum);
  }

  // acc += token t's super-block sums in the float steps above.
  LLMCTL_AVX2 static __m256 finish(const uint8_t* p, const TileArgs& a, int64_t sbi, int t,
                                   __m256i tot, __m256i ms, __m256 acc) {
    const __m256 dx = _mm256_set1_ps(a.qd[t * (a.n / 32) + 8 * sbi]);
    const __m256 d = _mm256_loadu_ps(reinterpret_cast<const float*>(p + kDOffset));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(tot), _mm256_mul_ps(d, dx), acc);
    if constexpr (kHasMin) {
      const __m256 dmin = _mm256_loadu_ps(reinterpret_cast<const float*>(p + kDminOffset));
      acc = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(ms), _mm256_mul_ps(dmin, dx), acc);
    }
    return acc;
  }

  template <int T>
  LLMCTL_AVX2 static void superblock(const uint8_t* p, const TileArgs& a, int64_t sbi,
                                     __m256* acc) {
    __m256i tot[static_cast<size_t>(T)], ms[static_cast<size_t>(T)];
    for (int t = 0; t < T; ++t) tot[t] = ms[t] = _mm256_setzero_si256();
    for (int j = 0; j < 8; ++j) {
      __m256i w[8];
      for (int s = 0; s < 8; ++s) w[s] = kq_load(p + 256 * j + 32 * s);
      for (int t = 0; t < T; ++t) block_sums(p, j, w, a, sbi, t, tot[t], ms[t]);
    }
    for (int t = 0; t < T; ++t) acc[t] = finish(p, a, sbi, t, tot[t], ms[t], acc[t]);
  }

  // The same over a 16-row panel record (matmul_paired_tile_avx512.h: every offset doubled):
  // vpdpbusd sums of each 16-element half, then the scales in int32. Where a half's sum fits
  // int16 (|sum| <= 16 * kMaxU * 128: Q2_K, Q3_K), the two halves' sums as one
  // int16 pair meet the pair (sc_a, sc_b) in one vpdpwssd; else (Q6_K: u <= 63) each is
  // multiplied by its scale (vpmulld: |half sum| <= 16 * 63 * 127, times |sc| <= 128) and
  // added. The o terms once per token at the super-block's end, one vpdpwssd a block. The
  // same integers either way.
  LLMCTL_AVX512_BEGIN
  static constexpr bool kHalfSumsInt16 = 16 * kMaxU * 128 <= 32767;
  // tot[t] += sc * (half H's sum of T tokens), in int32 (vpmulld)
  template <int T, int H>
  LLMCTL_AVX512 static void scaled_half512(const uint8_t* w, const int8_t* qx, int64_t n,
                                           __m512i sc, __m512i* tot) {
    __m512i part[static_cast<size_t>(T)];
    dots_u8_512<T, 4 * H, 4 * H + 4>(w, qx, n, part);
    for (int t = 0; t < T; ++t) tot[t] = _mm512_add_epi32(tot[t], _mm512_mullo_epi32(part[t], sc));
  }
  template <int T>
  LLMCTL_AVX512 static void superblock512(const uint8_t* p, const TileArgs& a, int64_t sbi,
                                          __m512* acc) {
    const int64_t nb = a.n / 32;
    const __mmask32 high = 0xaaaaaaaau;  // the high int16 of each dword
    __m512i tot[static_cast<size_t>(T)];
    for (int t = 0; t < T; ++t) tot[t] = _mm512_setzero_si512();
    for (int j = 0; j < 8; ++j) {
      const uint8_t* w = p + 512 * j;
      const int8_t* qx = a.qs + kKQuantSuperBlock * sbi + 32 * j;
      // the int16 pairs (sc_a, sc_a) and (sc_b, sc_b)
      const __m512i sa = _mm512_loadu_si512(p + 2 * kSaOffset + 64 * j);
      const __m512i sb = _mm512_loadu_si512(p + 2 * kSbOffset + 64 * j);
      if constexpr (kHalfSumsInt16) {
        const __m512i pair = _mm512_mask_blend_epi16(high, sa, sb);  // (sc_a, sc_b)
        __m512i part_a[static_cast<size_t>(T)], part_b[static_cast<size_t>(T)];
        dots_u8_512<T, 0, 4>(w, qx, a.n, part_a);
        dots_u8_512<T, 4, 8>(w, qx, a.n, part_b);
        for (int t = 0; t < T; ++t)
          tot[t] = _mm512_dpwssd_epi32(
              tot[t], _mm512_mask_blend_epi16(high, part_a[t], _mm512_slli_epi32(part_b[t], 16)),
              pair);
      } else {  // the high half of (sc, sc), sign-extended, is sc
        scaled_half512<T, 0>(w, qx, a.n, _mm512_srai_epi32(sa, 16), tot);
        scaled_half512<T, 1>(w, qx, a.n, _mm512_srai_epi32(sb, 16), tot);
      }
    }
    const __m512 d = _mm512_loadu_ps(p + 2 * kDOffset);
    for (int t = 0; t < T; ++t) {
      const int32_t* xh = a.qhalf + t * nb + 8 * sbi;
      __m512i o = _mm512_setzero_si512();
      for (int j = 0; j < 8; ++j)
        o = _mm512_dpwssd_epi32(o, _mm512_set1_epi32(xh[j]),
                                _mm512_loadu_si512(p + 2 * kOffOffset + 64 * j));
      const __m512 dx = _mm512_set1_ps(a.qd[t * nb + 8 * sbi]);
      if constexpr (!kHasMin) tot[t] = _mm512_add_epi32(tot[t], o);
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(tot[t]), _mm512_mul_ps(d, dx), acc[t]);
      if constexpr (kHasMin)
        acc[t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(o),
                                  _mm512_mul_ps(_mm512_loadu_ps(p + 2 * kDminOffset), dx), acc[t]);
    }
  }
  LLMCTL_AVX512_END
#endif
};

}  // namespace llmctl::cpu
