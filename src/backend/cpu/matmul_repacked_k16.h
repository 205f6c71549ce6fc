#pragma once
// Internal to the matmul fast path: what the repacked traits of the 16-element sub-block
// K-quants (Q3_K, Q6_K; matmul_repacked_tile.h's RK) share. Both records (weight_repack.h) hold
// the quants as 32-byte vectors of 8 row lanes, 16 int8 scales per row (sc_i, Q3_K's minus 32)
// and 8 fp16 d at R::kDAt. The kernels multiply u = q + R::kOffset (Q3_K 4, Q6_K 32; unsigned
// for vpdpbusd and maddubs) and take the offset back through the halves' activation sums:
//   isum_j = sc_2j (sum_{l<16} u x - off xa) + sc_2j+1 (sum_{l>=16} u x - off xb)
// the same integer as the in-place trait's (matmul_k16_tile.h), so the same bits; then one
// fma(float(tot), d * d_x, acc) per super-block.
//
// The scales' layout (R::kPairedScales) follows what the AVX-512 decode does with them:
//   paired (Q3_K)  scale 2 j + e of row r at R::kScalesAt + 16 j + 2 r + e: one widening load
//                  gives each row lane block j's pair (sc_2j, sc_2j+1) as two int16. A half
//                  block's sum fits int16 (u <= 7: 16 * 7 * 128), so both halves meet the pair
//                  in one vpdpwssd, and the offset terms in another.
//   by sub-block (Q6_K)  scale i of row r at R::kScalesAt + 8 i + r: its halves' sums do not
//                  fit int16 (u <= 63), so each is multiplied by its scale in int32 (vpmulld),
//                  which takes the scales as int32 lanes, one widening load each (the paired
//                  layout cost the AVX-512 Q6_K decode up to 7 %, one thread).
//
// R (CRTP) gives KQ (the in-place trait), kRecordBytes, kScalesAt, kDAt, kOffset (4 or 32),
// kPairedScales, kOneTokenAcross (the AVX-512 decode of one token steps across a half's 4
// blocks, else block by block as for more tokens), weight(rec, h, k, s): step s of block
// 4 h + k, 4 weights u per row lane, and
// weights(rec, h, s, w[4]): the same for k = 0..3 (a type may share loads across them);
// optionally decode_weight(rec, h, k, s) and decode_shift(k), the AVX-512 decode's own (below).

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

  // Block j's scales per row lane: the int16 pair (sc_2j, sc_2j+1) (paired layout), or each
  // as int32 lanes (either layout).
  LLMCTL_AVX2 static __m256i scale_pair(const uint8_t* rec, int j) {
    static_assert(R::kPairedScales, "the paired layout");
    return _mm256_cvtepi8_epi16(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(rec + R::kScalesAt + 16 * j)));
  }
  LLMCTL_AVX2 static void scales(const uint8_t* rec, int j, __m256i& sa, __m256i& sb) {
    if constexpr (R::kPairedScales) {
      const __m256i pair = scale_pair(rec, j);
      sa = _mm256_srai_epi32(_mm256_slli_epi32(pair, 16), 16);
      sb = _mm256_srai_epi32(pair, 16);
    } else {
      sa = rp_i8_lanes(rec + R::kScalesAt + 16 * j);
      sb = rp_i8_lanes(rec + R::kScalesAt + 16 * j + 8);
    }
  }

  // The in-place trait's 8-row panel record: sa, sb, o = -off sc, d (unpack_scales: from
  // byte kPanelWeightBytes on), then the weights (before it).
  static constexpr size_t kPanelWeightBytes = 8 * 256;
  LLMCTL_AVX2 static void unpack(const uint8_t* rec, uint8_t* p) {
    unpack_scales(rec, p);
    for (int h = 0; h < 2; ++h)
      for (int s = 0; s < 8; ++s) {
        __m256i w[4];
        R::weights(rec, h, s, w);
        for (int k = 0; k < 4; ++k) kq_store(p + 256 * (4 * h + k) + 32 * s, w[k]);
      }
  }
  LLMCTL_AVX2 static void unpack_scales(const uint8_t* rec, uint8_t* p) {
    using KQ = typename R::KQ;
    static_assert(KQ::kSaOffset == kPanelWeightBytes, "the scales follow the weights");
    for (int j = 0; j < 8; ++j) {
      __m256i sa, sb;
      scales(rec, j, sa, sb);
      const __m256i zero = _mm256_setzero_si256();
      KQ::store_scales(p, j, sa, sb, _mm256_sub_epi32(zero, _mm256_slli_epi32(sa, offset_shift())),
                       _mm256_sub_epi32(zero, _mm256_slli_epi32(sb, offset_shift())));
    }
    _mm256_storeu_ps(reinterpret_cast<float*>(p + KQ::kDOffset), rp_fp16_lanes(rec + R::kDAt));
  }

  // AVX-512 VNNI decode of T tokens (token t's activations t * n further): exact int32
  // vpdpbusd sums per half block, the weights unpacked once a step. Paired scales: the halves'
  // sums, as one int16 pair, meet the scale pair in one vpdpwssd, and the offset terms (the
  // halves' activation sums, TileArgs::qhalf, against the same pair) add up in another and come
  // off once at the end: the same integer. Else each half's sum, less off x its activation sum,
  // times its scale (vpmulld).
  template <int T>
  LLMCTL_AVX512 static void decode(const uint8_t* rec, const TileArgs& a, int64_t sb, __m256* acc) {
    const int64_t nb = a.n / 32;
    // d at the super-block's start: its line is at the record's end, and read there the tile
    // waited on it (the AVX2 Q6_K decode ran 4 to 8 % slower on one thread)
    const __m256 d = rp_fp16_lanes(rec + R::kDAt);
    // by sub-block, one token: the halves' sums from the activations here, not TileArgs::qhalf
    // (the same values: read from there, the Q6_K decode ran 0.81x to 0.89x, one thread)
    alignas(32) int32_t xh[8];
    if constexpr (!R::kPairedScales && T == 1) R::KQ::half_sums(a.qs + kKQuantSuperBlock * sb, xh);
    __m256i tot[static_cast<size_t>(T)], off[static_cast<size_t>(T)];
    for (int t = 0; t < T; ++t) tot[t] = off[t] = _mm256_setzero_si256();
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      if constexpr (T == 1 && R::kOneTokenAcross) {
        // step s of the half's 4 blocks together (their decode_weight loads are the same
        // vectors): 8 sums in flight
        __m256i part[4][1][2];
        for (auto& p : part) p[0][0] = p[0][1] = _mm256_setzero_si256();
        const int8_t* qx = a.qs + 32 * (8 * sb + 4 * h);
#pragma GCC unroll 8
        for (int s = 0; s < 8; ++s)
#pragma GCC unroll 4
          for (int k = 0; k < 4; ++k)
            part[k][0][s / 4] =
                rp_dot4(part[k][0][s / 4], R::decode_weight(rec, h, k, s), qx + 32 * k + 4 * s);
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) add_block<T>(rec, a, sb, h, k, part[k], xh, tot, off);
      } else {
        // block by block, 2 accumulators a token live; unrolled, so that decode_weight's
        // shifts are immediates
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) {
          const int8_t* qx = a.qs + 32 * (8 * sb + 4 * h + k);
          __m256i part[static_cast<size_t>(T)][2];
          for (int t = 0; t < T; ++t) part[t][0] = part[t][1] = _mm256_setzero_si256();
          for (int s = 0; s < 8; ++s) {
            const __m256i w = R::decode_weight(rec, h, k, s);
            for (int t = 0; t < T; ++t)
              part[t][s / 4] = rp_dot4(part[t][s / 4], w, qx + t * a.n + 4 * s);
          }
          add_block<T>(rec, a, sb, h, k, part, xh, tot, off);
        }
      }
    }
    for (int t = 0; t < T; ++t) {
      if constexpr (R::kPairedScales)
        tot[t] = _mm256_sub_epi32(tot[t], _mm256_slli_epi32(off[t], offset_shift()));
      acc[t] = finish(d, a.qd[t * nb + 8 * sb], tot[t], acc[t]);
    }
  }

  // Block 4 h + k's half sums part[t][0..1] (of the weights u << decode_shift(k)) of T tokens
  // into tot and off (decode's integer steps; xh: the one-token halves' activation sums).
  template <int T>
  LLMCTL_AVX512 static inline __attribute__((always_inline)) void add_block(
      const uint8_t* rec, const TileArgs& a, int64_t sb, int h, int k, __m256i (*part)[2],
      const int32_t* xh, __m256i* tot, __m256i* off) {
    const int64_t nb = a.n / 32;
    const int j = 4 * h + k;
    const int64_t b = 8 * sb + j;
    const int shift = R::decode_shift(k);
    if constexpr (R::kPairedScales) {
      static_assert(R::KQ::kHalfSumsInt16, "a half block's sum fits int16");
      // (sum_a, sum_b) as int16: sum_b is a multiple of 2^shift, so << (16 - shift) leaves
      // exactly sum_b / 2^shift in the high half
      const __m256i pair = scale_pair(rec, j);
      for (int t = 0; t < T; ++t) {
        const __m256i sums =
            _mm256_blend_epi16(shift != 0 ? _mm256_srai_epi32(part[t][0], shift) : part[t][0],
                               _mm256_slli_epi32(part[t][1], 16 - shift), 0xaa);
        tot[t] = _mm256_dpwssd_epi32(tot[t], sums, pair);
        off[t] = _mm256_dpwssd_epi32(off[t], _mm256_set1_epi32(a.qhalf[t * nb + b]), pair);
      }
    } else {
      __m256i sa, sc_b;
      scales(rec, j, sa, sc_b);
      for (int t = 0; t < T; ++t)
        if (shift != 0)
          for (__m256i& p : part[t]) p = _mm256_srai_epi32(p, shift);
      if constexpr (T == 1) {  // the halves' offsets from the sums computed above (xh)
        const int32_t xa = static_cast<int16_t>(xh[j] & 0xffff), xb = xh[j] >> 16;
        tot[0] = _mm256_add_epi32(
            tot[0],
            _mm256_add_epi32(
                _mm256_mullo_epi32(
                    sa, _mm256_sub_epi32(part[0][0], _mm256_set1_epi32(R::kOffset * xa))),
                _mm256_mullo_epi32(
                    sc_b, _mm256_sub_epi32(part[0][1], _mm256_set1_epi32(R::kOffset * xb)))));
      } else {
        // several tokens: each half's sum times its scale, and the offsets in one vpdpwssd
        // a token, the halves' activation sums (xa, xb) against (-off sc_a, -off sc_b)
        // (|off sc| <= 4096): one thread, 2048x8192 and 8192x2048, 4 to 16 tokens 1.08x
        // to 1.22x over two subtractions and broadcasts a token
        const __m256i zero = _mm256_setzero_si256();
        const __m256i opair = _mm256_blend_epi16(
            _mm256_sub_epi32(zero, _mm256_slli_epi32(sa, offset_shift())),
            _mm256_sub_epi32(zero, _mm256_slli_epi32(sc_b, 16 + offset_shift())), 0xaa);
        for (int t = 0; t < T; ++t) {
          tot[t] = _mm256_add_epi32(tot[t], _mm256_add_epi32(_mm256_mullo_epi32(sa, part[t][0]),
                                                             _mm256_mullo_epi32(sc_b, part[t][1])));
          tot[t] = _mm256_dpwssd_epi32(tot[t], _mm256_set1_epi32(a.qhalf[t * nb + b]), opair);
        }
      }
    }
  }

  LLMCTL_AVX2 static __m256 finish(__m256 d, float dx, __m256i tot, __m256 acc) {
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(tot), _mm256_mul_ps(d, _mm256_set1_ps(dx)), acc);
  }

  // AVX2 decode of T tokens, block by block: two maddubs steps in int16 (|u x| sums stay within
  // int16 for u <= 63), a madd with the sub-block's scale pair (sc, sc), and the offset as the
  // in-place tile's o term: isum = sum_a sc_a u x + sum_b sc_b u x - (xa off sc_a + xb off sc_b).
  template <int T>
  LLMCTL_AVX2 static void decode_avx2(const uint8_t* rec, const TileArgs& a, int64_t sb,
                                      __m256* acc) {
    if constexpr (T == 1 && R::kOneTokenAcross && R::kPairedScales && R::KQ::kGroup == 4) {
      one_token_avx2(rec, a, sb, acc);
      return;
    }
    const int64_t nb = a.n / 32;
    const __m256 d = rp_fp16_lanes(rec + R::kDAt);
    __m256i tot[static_cast<size_t>(T)];
    for (int t = 0; t < T; ++t) tot[t] = _mm256_setzero_si256();
      // unrolled: the weights' shifts become immediates (one thread: Q3_K 13.5 -> 16.2 GB/s,
      // Q6_K 19.3 -> 23.7)
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      const int h = j / 4, k = j % 4;
      const int64_t b = 8 * sb + j;
      const int8_t* qx = a.qs + 32 * b;
      // the scale pairs (sc_a, sc_a), (sc_b, sc_b) and the offset pair (off sc_a, off sc_b)
      // (|off sc| <= 4096)
      __m256i pa, pb, o;
      if constexpr (R::kPairedScales) {
        const __m256i pair = scale_pair(rec, j);  // (sc_a, sc_b)
        pa = _mm256_blend_epi16(pair, _mm256_slli_epi32(pair, 16), 0xaa);
        pb = _mm256_blend_epi16(_mm256_srai_epi32(pair, 16), pair, 0xaa);
        o = _mm256_slli_epi16(pair, offset_shift());
      } else {
        __m256i sa, sc_b;
        scales(rec, j, sa, sc_b);
        pa = _mm256_blend_epi16(sa, _mm256_slli_epi32(sa, 16), 0xaa);
        pb = _mm256_blend_epi16(sc_b, _mm256_slli_epi32(sc_b, 16), 0xaa);
        o = _mm256_blend_epi16(_mm256_slli_epi32(sa, offset_shift()),
                               _mm256_slli_epi32(sc_b, 16 + offset_shift()), 0xaa);
      }
      __m256i isum[static_cast<size_t>(T)];
      for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
      for (int g = 0; g < 8; g += 2) {
        const __m256i w0 = R::weight(rec, h, k, g), w1 = R::weight(rec, h, k, g + 1);
        for (int t = 0; t < T; ++t) {
          const int8_t* xt = qx + t * a.n + 4 * g;
          const __m256i p = _mm256_add_epi16(rp_maddubs4(w0, xt), rp_maddubs4(w1, xt + 4));
          isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(p, g < 4 ? pa : pb));
        }
      }
      for (int t = 0; t < T; ++t) {
        isum[t] =
            _mm256_sub_epi32(isum[t], _mm256_madd_epi16(_mm256_set1_epi32(a.qhalf[t * nb + b]), o));
        tot[t] = _mm256_add_epi32(tot[t], isum[t]);
      }
    }
    for (int t = 0; t < T; ++t) acc[t] = finish(d, a.qd[t * nb + 8 * sb], tot[t], acc[t]);
  }

  // One token with AVX2 (Q3_K: kOneTokenAcross, paired scales, the 4 steps of a half block in
  // int16): rp_half_maddubs's sums, then decode_avx2's madds per block, so the same integers.
  // Against block by block, held to AVX2 on the Xeon: 1.05x with the weights in cache, 1.03x
  // to 1.07x from memory (one and two threads, 2048x8192 and 8192x2048).
  LLMCTL_AVX2 static void one_token_avx2(const uint8_t* rec, const TileArgs& a, int64_t sb,
                                         __m256* acc) {
    __m256i tot = _mm256_setzero_si256();
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      __m256i part[4][2];
      rp_half_maddubs<R>(rec, h, a.qs + 32 * (8 * sb + 4 * h), part);
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        const int j = 4 * h + k;
        const __m256i pair = scale_pair(rec, j);  // (sc_a, sc_b)
        const __m256i pa = _mm256_blend_epi16(pair, _mm256_slli_epi32(pair, 16), 0xaa);
        const __m256i pb = _mm256_blend_epi16(_mm256_srai_epi32(pair, 16), pair, 0xaa);
        const __m256i o = _mm256_slli_epi16(pair, offset_shift());
        const __m256i isum =
            _mm256_add_epi32(_mm256_madd_epi16(part[k][0], pa), _mm256_madd_epi16(part[k][1], pb));
        tot = _mm256_add_epi32(
            tot,
            _mm256_sub_epi32(isum, _mm256_madd_epi16(_mm256_set1_epi32(a.qhalf[8 * sb + j]), o)));
      }
    }
    acc[0] = finish(rp_fp16_lanes(rec + R::kDAt), a.qd[8 * sb], tot, acc[0]);
  }
};

LLMCTL_AVX512_END
#endif  // LLMCTL_HAVE_X86

}  // namespace llmctl::cpu
