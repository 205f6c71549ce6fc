#pragma once
// Internal to the matmul fast path: the repacked trait (matmul_repacked_tile.h,
// matmul_repacked_tile_avx2.h) of Q4_K and Q5_K, which share their records (weight_repack.h:
// the nibble vectors at 0, Q5_K's fifth-bit vectors at 1024, then d, dmin, the 6-bit scales
// and mins) and the in-place trait KQ45_K (matmul_q45_k.h). matmul_q4_k.cpp and
// matmul_q5_k.cpp instantiate it.
//
// Both decode tiles compute the in-place kernels' exact integer sums (AVX-512: vpdpbusd; AVX2:
// maddubs steps added KQ::kGroup at a time in int16, as KQ45_K::dots) and the same float
// steps, once per super-block (q45_k_finish).
#include "backend/cpu/matmul_q45_k.h"
#include "backend/cpu/matmul_repacked_tile.h"
#include "backend/cpu/weight_repack.h"

namespace llmctl::cpu {

#if defined(LLMCTL_HAVE_X86)
LLMCTL_AVX512_BEGIN
template <bool kHigh>
struct RQ45_K {
  using KQ = KQ45_K<kHigh>;
  static constexpr size_t kRecordBytes = kHigh ? kQ5kRecordBytes : kQ4kRecordBytes;
  // weight_repack.h: the qh vectors (Q5_K), then d, dmin, sc, m at kScales, + 16, + 32, + 96
  static constexpr size_t kQh = 1024, kScales = kHigh ? 1280 : 1024;

  // sc_j and m_j of the 8 rows as int32 lanes.
  LLMCTL_AVX2 static __m256i sub_scale(const uint8_t* rec, int j) {
    return rp_u8_lanes(rec + kScales + 32 + 8 * j);
  }
  LLMCTL_AVX2 static __m256i sub_min(const uint8_t* rec, int j) {
    return rp_u8_lanes(rec + kScales + 96 + 8 * j);
  }
  LLMCTL_AVX2 static void min_pairs(const uint8_t* rec, __m256i mp[4]) {
    for (int q = 0; q < 4; ++q)
      mp[q] = q45_k_min_pair(sub_min(rec, 2 * q), sub_min(rec, 2 * q + 1));
  }

  // Step s of sub-blocks 2c (w[0]) and 2c + 1 (w[1]): 4 weights per row lane, q unsigned
  // (KQ45_K::unpack_pair's values).
  LLMCTL_AVX2 static void weights(const uint8_t* rec, int c, int s, __m256i w[2]) {
    const __m256i low = _mm256_set1_epi8(0x0f);
    const __m256i g = kq_load(rec + 32 * (8 * c + s));
    w[0] = _mm256_and_si256(g, low);
    w[1] = _mm256_and_si256(_mm256_srli_epi16(g, 4), low);
    if constexpr (kHigh) {
      // bit j of the qh bytes to bit 4 (the 16-bit shifts keep it inside its byte)
      const __m256i hb = kq_load(rec + kQh + 32 * s), bit4 = _mm256_set1_epi8(0x10);
      for (int h = 0; h < 2; ++h) {
        const int j = 2 * c + h;
        const __m256i b = j <= 4 ? _mm256_slli_epi16(hb, 4 - j) : _mm256_srli_epi16(hb, j - 4);
        w[h] = _mm256_or_si256(w[h], _mm256_and_si256(b, bit4));
      }
    }
  }

  // weights() of both groups' records at once (rec0 in the low 256 bits): the prefill's pack
  // (weights512) and the small batches' 16-row tile (decode16).
  LLMCTL_AVX512 static void weights_both(const uint8_t* rec0, const uint8_t* rec1, int c, int s,
                                         __m512i w[2]) {
    const __m512i low = _mm512_set1_epi8(0x0f), bit4 = _mm512_set1_epi8(0x10);
    const __m512i g = rp_both_groups(rec0, rec1, 32 * static_cast<size_t>(8 * c + s));
    w[0] = _mm512_and_si512(g, low);
    w[1] = _mm512_and_si512(_mm512_srli_epi16(g, 4), low);
    if constexpr (kHigh) {
      const __m512i hb = rp_both_groups(rec0, rec1, kQh + 32 * static_cast<size_t>(s));
      for (int h = 0; h < 2; ++h) {
        const int j = 2 * c + h;
        const __m512i b = j <= 4 ? _mm512_slli_epi16(hb, 4 - j) : _mm512_srli_epi16(hb, j - 4);
        w[h] = _mm512_ternarylogic_epi32(w[h], b, bit4, 0xf8);
      }
    }
  }
  // The AVX-512 prefill's pack (RepackedTile::pack16): weights() of blocks 4 h .. 4 h + 3
  // (c = 2 h, 2 h + 1), step s, of two records at once (rec0 in the low 256 bits).
  static constexpr bool kPackWide = true;
  static constexpr size_t kPanelWeightBytes = kQ45kScOffset;  // the weights, then the scales
  template <int kH>
  LLMCTL_AVX512 static void weights512(const uint8_t* rec0, const uint8_t* rec1, int s,
                                       __m512i w[4]) {
    for (int i = 0; i < 2; ++i) weights_both(rec0, rec1, 2 * kH + i, s, w + 2 * i);
  }
  LLMCTL_AVX512 static void weights512(const uint8_t* rec0, const uint8_t* rec1, int h, int s,
                                       __m512i w[4]) {
    if (h == 0)
      weights512<0>(rec0, rec1, s, w);
    else
      weights512<1>(rec0, rec1, s, w);
  }

  LLMCTL_AVX2 static void unpack(const uint8_t* rec, uint8_t* p) {
    unpack_scales(rec, p);
    for (int c = 0; c < 4; ++c)
      for (int s = 0; s < 8; ++s) {
        __m256i w[2];
        weights(rec, c, s, w);
        kq_store(p + 256 * (2 * c) + 32 * s, w[0]);
        kq_store(p + 256 * (2 * c + 1) + 32 * s, w[1]);
      }
  }
  LLMCTL_AVX2 static void unpack_scales(const uint8_t* rec, uint8_t* p) {
    _mm256_storeu_ps(reinterpret_cast<float*>(p + kQ45kDOffset), rp_fp16_lanes(rec + kScales));
    _mm256_storeu_ps(reinterpret_cast<float*>(p + kQ45kDminOffset),
                     rp_fp16_lanes(rec + kScales + 16));
    for (int j = 0; j < 8; ++j)
      kq_store(p + kQ45kScOffset + 32 * j, q45_k_sc_pair(sub_scale(rec, j)));
    __m256i mp[4];
    min_pairs(rec, mp);
    for (int q = 0; q < 4; ++q) kq_store(p + kQ45kMinOffset + 32 * q, mp[q]);
  }

  // acc[t] from token t's super-block sum tot[t] (q45_k_finish).
  template <int T>
  LLMCTL_AVX2 static void finish(const uint8_t* rec, const TileArgs& a, int64_t sb,
                                 const __m256i* tot, __m256* acc) {
    __m256i mp[4];
    min_pairs(rec, mp);
    const __m256 d = rp_fp16_lanes(rec + kScales), dmin = rp_fp16_lanes(rec + kScales + 16);
    for (int t = 0; t < T; ++t) {
      const int64_t b = t * (a.n / 32) + 8 * sb;
      acc[t] = q45_k_finish(tot[t], d, dmin, mp, a.qpair + b / 2, a.qd[b], acc[t]);
    }
  }

  // AVX-512 VL VNNI decode of T tokens (token t's activations t * n further): exact int32
  // sums, one vpdpbusd a step and token, the weights unpacked once a step. One token steps
  // across the 4 pairs of blocks (one_token: 8 sums in flight); more tokens run the pairs one
  // after the other, unrolled, so that Q5_K's fifth-bit shifts are immediates (rolled, its
  // 12-token batches ran at 60 % of Q4_K's).
  template <int T>
  LLMCTL_AVX512 static void decode(const uint8_t* rec, const TileArgs& a, int64_t sb, __m256* acc) {
    __m256i tot[static_cast<size_t>(T)];
    for (int t = 0; t < T; ++t) tot[t] = _mm256_setzero_si256();
    if constexpr (T == 1) {
      tot[0] = one_token(rec, a, sb);
    } else {
      block_pair<T>(rec, a, sb, 0, tot);
      block_pair<T>(rec, a, sb, 1, tot);
      block_pair<T>(rec, a, sb, 2, tot);
      block_pair<T>(rec, a, sb, 3, tot);
    }
    finish<T>(rec, a, sb, tot, acc);
  }
  // One token's scaled super-block sum: step s of all 8 sub-blocks before step s + 1, so that
  // 8 independent vpdpbusd chains overlap their latency. Pair after pair, 2 chains at a time,
  // the one-token decode ran 1.06x to 1.13x slower (one thread, the weights in L2; 1.02x from
  // memory at two threads).
  LLMCTL_AVX512 static __m256i one_token(const uint8_t* rec, const TileArgs& a, int64_t sb) {
    const int8_t* x = a.qs + kKQuantSuperBlock * sb;
    __m256i isum[8];
    for (__m256i& v : isum) v = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s)
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        __m256i w[2];
        weights(rec, c, s, w);
        for (int h = 0; h < 2; ++h) {
          const int j = 2 * c + h;
          isum[j] = rp_dot4(isum[j], w[h], x + 32 * j + 4 * s);
        }
      }
    __m256i tot = _mm256_mullo_epi32(isum[0], sub_scale(rec, 0));
    for (int j = 1; j < 8; ++j)
      tot = _mm256_add_epi32(tot, _mm256_mullo_epi32(isum[j], sub_scale(rec, j)));
    return tot;
  }
  // Blocks 2 c (low nibbles) and 2 c + 1 (high) of T tokens, scaled, into tot.
  template <int T>
  LLMCTL_AVX512 static inline __attribute__((always_inline)) void block_pair(const uint8_t* rec,
                                                                             const TileArgs& a,
                                                                             int64_t sb, int c,
                                                                             __m256i* tot) {
    const int8_t* x0 = a.qs + 32 * (8 * sb + 2 * c);
    __m256i isum[static_cast<size_t>(T)][2];
    for (int t = 0; t < T; ++t) isum[t][0] = isum[t][1] = _mm256_setzero_si256();
    for (int s = 0; s < 8; ++s) {
      __m256i w[2];
      weights(rec, c, s, w);
      for (int t = 0; t < T; ++t)
        for (int h = 0; h < 2; ++h)
          isum[t][h] = rp_dot4(isum[t][h], w[h], x0 + t * a.n + 32 * h + 4 * s);
    }
    for (int h = 0; h < 2; ++h) {
      const __m256i sc = sub_scale(rec, 2 * c + h);
      for (int t = 0; t < T; ++t)
        tot[t] = _mm256_add_epi32(tot[t], _mm256_mullo_epi32(isum[t][h], sc));
    }
  }

  static constexpr bool kDecode16 = true;
  LLMCTL_AVX512 static __m512 fp16_both(const uint8_t* p0, const uint8_t* p1) {
    return _mm512_insertf32x8(_mm512_castps256_ps512(rp_fp16_lanes(p0)), rp_fp16_lanes(p1), 1);
  }
  LLMCTL_AVX512 static __m512i both512(__m256i lo, __m256i hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
  }
  // 16 rows (two groups' records) of T tokens, zmm (RepackedTile's small batches):
  // q45_k_superblock512's integers and float steps, the weights unpacked in registers instead
  // of read from a panel.
  template <int T>
  LLMCTL_AVX512 static void decode16(const uint8_t* rec0, const uint8_t* rec1, const TileArgs& a,
                                     int64_t sb, __m512* acc) {
    __m512i tot[static_cast<size_t>(T)];
    for (int t = 0; t < T; ++t) tot[t] = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const int8_t* x0 = a.qs + 32 * (8 * sb + 2 * c);
      __m512i isum[static_cast<size_t>(T)][2];
      for (int t = 0; t < T; ++t) isum[t][0] = isum[t][1] = _mm512_setzero_si512();
      for (int s = 0; s < 8; ++s) {
        __m512i w[2];
        weights_both(rec0, rec1, c, s, w);
        for (int t = 0; t < T; ++t)
          for (int h = 0; h < 2; ++h)
            isum[t][h] = dot4_u8s8_bcast(isum[t][h], w[h], x0 + t * a.n + 32 * h + 4 * s);
      }
      for (int h = 0; h < 2; ++h) {
        const __m512i sc = both512(sub_scale(rec0, 2 * c + h), sub_scale(rec1, 2 * c + h));
        for (int t = 0; t < T; ++t)
          tot[t] = _mm512_add_epi32(tot[t], _mm512_mullo_epi32(isum[t][h], sc));
      }
    }
    __m256i mp0[4], mp1[4];
    min_pairs(rec0, mp0);
    min_pairs(rec1, mp1);
    __m512i mp[4];
    for (int q = 0; q < 4; ++q) mp[q] = both512(mp0[q], mp1[q]);
    q45_k_finish512<T>(fp16_both(rec0 + kScales, rec1 + kScales),
                       fp16_both(rec0 + kScales + 16, rec1 + kScales + 16), mp, a, sb, tot, acc);
  }

  // AVX2 decode of T tokens: KQ::kGroup maddubs steps in int16 (they fit: matmul_q45_k.h), then
  // a madd with the sub-block's scale pair (sc, sc).
  template <int T>
  LLMCTL_AVX2 static void decode_avx2(const uint8_t* rec, const TileArgs& a, int64_t sb,
                                      __m256* acc) {
    constexpr int kGroup = KQ::kGroup;
    __m256i tot[static_cast<size_t>(T)];
    for (int t = 0; t < T; ++t) tot[t] = _mm256_setzero_si256();
      // unrolled: Q5_K's fifth-bit shifts become immediates (one thread: Q5_K 16.8 -> 24.5 GB/s,
      // Q4_K 25.5 -> 27). Unrolling the AVX-512 decode above cost Q4_K 7 %.
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const int64_t b0 = 8 * sb + 2 * c;
      const int8_t* x0 = a.qs + 32 * b0;
      const __m256i sc16[2] = {q45_k_sc_pair(sub_scale(rec, 2 * c)),
                               q45_k_sc_pair(sub_scale(rec, 2 * c + 1))};
      __m256i p[static_cast<size_t>(T)][2];
      for (int s = 0; s < 8; ++s) {
        __m256i w[2];
        weights(rec, c, s, w);
        for (int t = 0; t < T; ++t)
          for (int h = 0; h < 2; ++h) {
            const __m256i m = rp_maddubs4(w[h], x0 + t * a.n + 32 * h + 4 * s);
            p[t][h] = s % kGroup == 0 ? m : _mm256_add_epi16(p[t][h], m);
            if (s % kGroup == kGroup - 1)  // the int16 partial sums times sc, widened
              tot[t] = _mm256_add_epi32(tot[t], _mm256_madd_epi16(p[t][h], sc16[h]));
          }
      }
    }
    finish<T>(rec, a, sb, tot, acc);
  }
};
LLMCTL_AVX512_END
#else
template <bool kHigh>
struct RQ45_K;  // x86 only: the kernels' factories give none elsewhere
#endif

}  // namespace llmctl::cpu
