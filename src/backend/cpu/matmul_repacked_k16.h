#pragma once
// Internal to the matmul fast path: what the repacked traits of the 16-element sub-block
// K-quants (Q3_K, Q6_K; matmul_repacked_tile.h's RK) share. Both records (weight_repack.h) hold
// the quants as 32-byte vectors of 8 row lanes, 16 int8 scales per row (sc_i, Q3_K's minus 32)
// at R::kScalesAt + 8 i + r and 8 fp16 d at R::kDAt. The kernels multiply u = q + R::kOffset
// (Q3_K 4, Q6_K 32; unsigned for vpdpbusd and maddubs) and take the offset back through the
// halves' activation sums:
//   isum_j = sc_2j (sum_{l<16} u x - off xa) + sc_2j+1 (sum_{l>=16} u x - off xb)
// the same integer as the in-place trait's (matmul_k16_tile.h), so the same bits; then one
// fma(float(tot), d * d_x, acc) per super-block.
//
// R (CRTP) gives KQ (the in-place trait), kRecordBytes, kScalesAt, kDAt, kOffset (4 or 32),
// weight(rec, h, k, s): step s of block 4 h + k, 4 weights u per row lane, and weights(rec, h,
// s, w[4]): the same for k = 0..3 (a type may share loads across them); optionally
// decode_weight(rec, h, k, s) and decode_shift(k), the AVX-512 decode's own (below).

#include "backend/cpu/matmul_repacked_tile.h"

namespace llmctl::cpu {

#if defined(LLMCTL_HAVE_X86)
LLMCTL_AVX512_BEGIN

template <class R>
struct RepackedK16 {
  // log2 of R::kOffset (a function: R is incomplete where this class is instantiated)
  static constexpr int offset_shift() {
    static_assert(R::kOffset == 4 || R::kOffset == 32, "the offset is 4 or 32");
    return R::kOffset == 4 ? 2 : 5;
  }

  // The AVX-512 decode's weights of step s of block 4 h + k: u << decode_shift(k). A type may
  // leave them scaled where its bits sit (fewer shifts); each sum is then a multiple of
  // 2^decode_shift(k) and shifts back exactly. By default the unscaled weight().
  static constexpr int decode_shift(int /*k*/) { return 0; }
  LLMCTL_AVX512 static __m256i decode_weight(const uint8_t* rec, int h, int k, int s) {
    return R::weight(rec, h, k, s);
  }

  LLMCTL_AVX2 static __m256i scale(const uint8_t* rec, int i) {
    return rp_i8_lanes(rec + R::kScalesAt + 8 * i);
  }

  // The in-place trait's 8-row panel record: sa, sb, o = -off sc, d, then the weights.
  LLMCTL_AVX2 static void unpack(const uint8_t* rec, uint8_t* p) {
    using KQ = typename R::KQ;
    for (int j = 0; j < 8; ++j) {
      const __m256i sa = scale(rec, 2 * j), sb = scale(rec, 2 * j + 1);
      const __m256i zero = _mm256_setzero_si256();
      KQ::store_scales(p, j, sa, sb, _mm256_sub_epi32(zero, _mm256_slli_epi32(sa, offset_shift())),
                       _mm256_sub_epi32(zero, _mm256_slli_epi32(sb, offset_shift())));
    }
    _mm256_storeu_ps(reinterpret_cast<float*>(p + KQ::kDOffset), rp_fp16_lanes(rec + R::kDAt));
    for (int h = 0; h < 2; ++h)
      for (int s = 0; s < 8; ++s) {
        __m256i w[4];
        R::weights(rec, h, s, w);
        for (int k = 0; k < 4; ++k) kq_store(p + 256 * (4 * h + k) + 32 * s, w[k]);
      }
  }

  // AVX-512 VNNI decode: exact int32 vpdpbusd sums per half block.
  LLMCTL_AVX512 static void decode(const uint8_t* rec, const TileArgs& a, int64_t sb, __m256& acc) {
    alignas(32) int32_t xh[8];
    R::KQ::half_sums(a.qs + kKQuantSuperBlock * sb, xh);
    // d at the super-block's start: its line is at the record's end, and read there the tile
    // waited on it (the AVX2 Q6_K decode ran 4 to 8 % slower on one thread)
    const __m256 d = rp_fp16_lanes(rec + R::kDAt);
    __m256i tot = _mm256_setzero_si256();
    // block by block, 2 accumulators live (stepping s across 4 blocks held 8: Q3_K decoded
    // 1.2x slower, one thread); unrolled, so that decode_weight's shifts are immediates
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h)
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        const int j = 4 * h + k;
        const int8_t* qx = a.qs + 32 * (8 * sb + j);
        __m256i part[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
        for (int s = 0; s < 8; ++s)
          part[s / 4] = rp_dot4(part[s / 4], R::decode_weight(rec, h, k, s), qx + 4 * s);
        if (R::decode_shift(k) != 0)
          for (__m256i& p : part) p = _mm256_srai_epi32(p, R::decode_shift(k));
        const int32_t xa = static_cast<int16_t>(xh[j] & 0xffff), xb = xh[j] >> 16;
        const __m256i isum = _mm256_add_epi32(
            _mm256_mullo_epi32(scale(rec, 2 * j),
                               _mm256_sub_epi32(part[0], _mm256_set1_epi32(R::kOffset * xa))),
            _mm256_mullo_epi32(scale(rec, 2 * j + 1),
                               _mm256_sub_epi32(part[1], _mm256_set1_epi32(R::kOffset * xb))));
        tot = _mm256_add_epi32(tot, isum);
      }
    finish(d, a, sb, tot, acc);
  }

  LLMCTL_AVX2 static void finish(__m256 d, const TileArgs& a, int64_t sb, __m256i tot,
                                 __m256& acc) {
    const __m256 dx = _mm256_set1_ps(a.qd[8 * sb]);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(tot), _mm256_mul_ps(d, dx), acc);
  }

  // AVX2 decode, block by block: two maddubs steps in int16 (|u x| sums stay within int16 for
  // u <= 63), a madd with the sub-block's scale pair (sc, sc), and the offset as the in-place
  // tile's o term: isum = sum_a sc_a u x + sum_b sc_b u x - (xa off sc_a + xb off sc_b).
  LLMCTL_AVX2 static void decode_avx2(const uint8_t* rec, const TileArgs& a, int64_t sb,
                                      __m256& acc) {
    const __m256 d = rp_fp16_lanes(rec + R::kDAt);
    __m256i tot = _mm256_setzero_si256();
    // unrolled: the weights' shifts become immediates (one thread: Q3_K 13.5 -> 16.2 GB/s,
    // Q6_K 19.3 -> 23.7)
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      const int h = j / 4, k = j % 4;
      const int64_t b = 8 * sb + j;
      const int8_t* qx = a.qs + 32 * b;
      const __m256i sa = scale(rec, 2 * j), sc_b = scale(rec, 2 * j + 1);
      const __m256i pa = _mm256_blend_epi16(sa, _mm256_slli_epi32(sa, 16), 0xaa);
      const __m256i pb = _mm256_blend_epi16(sc_b, _mm256_slli_epi32(sc_b, 16), 0xaa);
      __m256i isum = _mm256_setzero_si256();
      for (int g = 0; g < 8; g += 2) {
        const __m256i p = _mm256_add_epi16(rp_maddubs4(R::weight(rec, h, k, g), qx + 4 * g),
                                           rp_maddubs4(R::weight(rec, h, k, g + 1), qx + 4 * g + 4));
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, g < 4 ? pa : pb));
      }
      // (off sc_a, off sc_b) as int16 pairs (|off sc| <= 4096)
      const __m256i o = _mm256_blend_epi16(_mm256_slli_epi32(sa, offset_shift()),
                                           _mm256_slli_epi32(sc_b, 16 + offset_shift()), 0xaa);
      isum = _mm256_sub_epi32(isum, _mm256_madd_epi16(_mm256_set1_epi32(a.qhalf[b]), o));
      tot = _mm256_add_epi32(tot, isum);
    }
    finish(d, a, sb, tot, acc);
  }
};

LLMCTL_AVX512_END
#endif  // LLMCTL_HAVE_X86

}  // namespace llmctl::cpu
