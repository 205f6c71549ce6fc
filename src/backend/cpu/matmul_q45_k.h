#pragma once
// Internal to the matmul fast path: the K-quant tile trait (matmul_kquant_tile.h) of Q4_K and
// Q5_K, which share d, dmin, the 12 packed bytes of 6-bit scales and mins, and the nibbles; Q5_K
// adds a fifth bit per weight (qh). matmul_q4_k.cpp and matmul_q5_k.cpp instantiate it.
//
// Arithmetic (matmul_kquant_tile.h), per super-block, against activations with one scale d_x
// per 256 elements (kActivationGroup, as ggml's Q8_K): the integer sums are exact,
//   tot = sum_j sc_j * (sum_l q * q_x),  msum = sum_j m_j * xsum_j,
//   acc = fma(float(tot), d * d_x, acc);  acc = fma(-float(msum), dmin * d_x, acc)
// Two float steps a super-block, where per-32 activation scales need two a sub-block (and a
// conversion and a scale product): the vpdpbusd steps of the 16-row AVX-512 prefill tile wait
// behind fewer other vector operations. tools/bench_matmul, one thread, 2-core AVX-512 EPYC
// (Zen 4), the same run: Q4_K 8192x2048 252 -> 293 GFLOP/s, 2048x8192 239 -> 282; Q5_K 247 ->
// 263 and 228 -> 261 (repacked); AVX2 tiles 1.03x to 1.18x; decode unchanged.
#include "backend/cpu/matmul_paired_tile_avx512.h"

namespace llmctl::cpu {

// Element e (0..255) of a Q4_K (with_high false: 0..15) or Q5_K (0..31) super-block.
inline int q45_k_value(const uint8_t* sb, bool with_high, int e) {
  const int j = e / 32, l = e % 32;
  const uint8_t* qs = sb + (with_high ? 48 : 16);
  const uint8_t b = qs[32 * (j / 2) + l];
  int v = j % 2 == 0 ? (b & 0x0f) : (b >> 4);
  if (with_high) v |= ((sb[16 + l] >> j) & 1) << 4;
  return v;
}

// A Q4_K / Q5_K super-block against 256 activations qx with scale dx and block sums xsum[0..7]
// (the scalar definition above).
inline float q45_k_scalar_superblock(const uint8_t* sb, bool with_high, const int8_t* qx, float dx,
                                     const int32_t* xsum, float acc) {
  int32_t tot = 0, msum = 0;
  for (int j = 0; j < 8; ++j) {
    int sc = 0, m = 0;
    k_scale_min(sb + 4, j, &sc, &m);
    int32_t isum = 0;
    for (int l = 0; l < 32; ++l) isum += q45_k_value(sb, with_high, 32 * j + l) * qx[32 * j + l];
    tot += sc * isum;
    msum += m * xsum[j];
  }
  acc = std::fma(static_cast<float>(tot), fp16_to_f32(load_u16_le(sb)) * dx, acc);
  return std::fma(-static_cast<float>(msum), fp16_to_f32(load_u16_le(sb + 2)) * dx, acc);
}

#if defined(LLMCTL_HAVE_X86)
// Q4_K / Q5_K panel record (8 rows, one super-block):
//   w[8][8]  at 256 j + 32 s: block j, weights 4s..4s+3 of rows 0..7, q unsigned
//   sc[8]    at 2048 + 32 j: 8 int32, the int16 pair sc_j | sc_j << 16 of each row (the AVX2
//            tiles' madd operand; the AVX-512 tile shifts sc_j out)
//   mp[4]    at 2304 + 32 p: 8 int32, m_2p | m_2p+1 << 16 of each row
//   d, dmin  at 2432, 2464: 8 floats each
constexpr size_t kQ45kScOffset = 2048, kQ45kMinOffset = 2304, kQ45kDOffset = 2432,
                 kQ45kDminOffset = 2464, kQ45kPanelBytes = 2496;

// The int16 pairs of mins m_2p | m_2p+1 << 16 from the 8 rows' int32 mins of sub-blocks 2p, 2p+1.
LLMCTL_AVX2 inline __m256i q45_k_min_pair(__m256i m_even, __m256i m_odd) {
  return _mm256_or_si256(m_even, _mm256_slli_epi32(m_odd, 16));
}

// The int16 pairs sc | sc << 16 from the 8 rows' int32 sub-block scales (0..63).
LLMCTL_AVX2 inline __m256i q45_k_sc_pair(__m256i sc) {
  return _mm256_or_si256(sc, _mm256_slli_epi32(sc, 16));
}

// The scales of the 8 rows' super-block at `off` into the panel record p (sc, mp, d, dmin).
LLMCTL_AVX2 inline void q45_k_scales(const uint8_t* const rows[8], size_t off, uint8_t* p) {
  __m256i g[4];  // g[0]: d | dmin << 16; g[1..3]: scale bytes 0..3, 4..7, 8..11
  kq_transpose16(rows, off, g);
  _mm256_storeu_ps(reinterpret_cast<float*>(p + kQ45kDOffset), kq_fp16_lanes(g[0], false));
  _mm256_storeu_ps(reinterpret_cast<float*>(p + kQ45kDminOffset), kq_fp16_lanes(g[0], true));
  const __m256i m6 = _mm256_set1_epi8(0x3f), m4 = _mm256_set1_epi8(0x0f),
                top = _mm256_set1_epi8(0x30), byte = _mm256_set1_epi32(0xff);
  // bytes k of sc_lo / m_lo: sub-block k; of sc_hi / m_hi: sub-block 4 + k (dequant.h packing:
  // the top two bits of bytes 0..7 are bits 4..5 of the upper sub-blocks' scales and mins)
  const __m256i sc_lo = _mm256_and_si256(g[1], m6), m_lo = _mm256_and_si256(g[2], m6);
  const __m256i sc_hi = _mm256_or_si256(_mm256_and_si256(g[3], m4),
                                        _mm256_and_si256(_mm256_srli_epi32(g[1], 2), top));
  const __m256i m_hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(g[3], 4), m4),
                                       _mm256_and_si256(_mm256_srli_epi32(g[2], 2), top));
  __m256i m[8];
  for (int j = 0; j < 8; ++j) {
    const __m128i sh = _mm_cvtsi32_si128(8 * (j % 4));
    kq_store(p + kQ45kScOffset + 32 * j,
             q45_k_sc_pair(_mm256_and_si256(_mm256_srl_epi32(j < 4 ? sc_lo : sc_hi, sh), byte)));
    m[j] = _mm256_and_si256(_mm256_srl_epi32(j < 4 ? m_lo : m_hi, sh), byte);
  }
  for (int q = 0; q < 4; ++q)
    kq_store(p + kQ45kMinOffset + 32 * q, q45_k_min_pair(m[2 * q], m[2 * q + 1]));
}

// The super-block's two float steps for one token (8 rows): from tot, the rows' d, dmin and
// min pairs mp[4], the token's block sums as the pairs xpair[0..3] (TileArgs::qpair) and scale
// dx.
LLMCTL_AVX2 inline __m256 q45_k_finish(__m256i tot, __m256 d, __m256 dmin, const __m256i mp[4],
                                       const int32_t* xpair, float dx, __m256 acc) {
  __m256i msum = _mm256_madd_epi16(mp[0], _mm256_set1_epi32(xpair[0]));
  for (int q = 1; q < 4; ++q)
    msum = _mm256_add_epi32(msum, _mm256_madd_epi16(mp[q], _mm256_set1_epi32(xpair[q])));
  const __m256 vdx = _mm256_set1_ps(dx);
  acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(tot), _mm256_mul_ps(d, vdx), acc);
  return _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_mul_ps(dmin, vdx), acc);
}

// q45_k_finish for T tokens from a panel record's scales.
template <int T>
LLMCTL_AVX2 inline void q45_k_finish_panel(const uint8_t* p, const TileArgs& a, int64_t sb,
                                           const __m256i* tot, __m256* acc) {
  const int64_t nb = a.n / 32;
  const __m256 d = _mm256_loadu_ps(reinterpret_cast<const float*>(p + kQ45kDOffset));
  const __m256 dmin = _mm256_loadu_ps(reinterpret_cast<const float*>(p + kQ45kDminOffset));
  __m256i mp[4];
  for (int q = 0; q < 4; ++q) mp[q] = kq_load(p + kQ45kMinOffset + 32 * q);
  for (int t = 0; t < T; ++t) {
    const int64_t b = t * nb + 8 * sb;
    acc[t] = q45_k_finish(tot[t], d, dmin, mp, a.qpair + b / 2, a.qd[b], acc[t]);
  }
}

// The panel's super-block for T tokens (KQ::scaled_dots: the blocks' scaled int8 products).
template <class KQ, int T>
LLMCTL_AVX2 inline void q45_k_superblock(const uint8_t* p, const TileArgs& a, int64_t sb,
                                         __m256* acc) {
  __m256i tot[static_cast<size_t>(T)];
  // set by the first scaled_dots; zeroed so that GCC 12 sees it (else -Wmaybe-uninitialized)
  for (int t = 0; t < T; ++t) tot[t] = _mm256_setzero_si256();
  for (int j = 0; j < 8; ++j)
    KQ::template scaled_dots<T>(p + 256 * j, a.qs + kKQuantSuperBlock * sb + 32 * j, a.n,
                                kq_load(p + kQ45kScOffset + 32 * j), j == 0, tot);
  q45_k_finish_panel<T>(p, a, sb, tot, acc);
}

// The same over a 16-row panel record (matmul_paired_tile_avx512.h: every offset doubled).
LLMCTL_AVX512_BEGIN
// q45_k_finish for T tokens, 16 lanes: the rows' d, dmin and min pairs mp[4], token t's sum
// tot[t] into acc[t].
template <int T>
LLMCTL_AVX512 inline void q45_k_finish512(__m512 d, __m512 dmin, const __m512i mp[4],
                                          const TileArgs& a, int64_t sb, const __m512i* tot,
                                          __m512* acc) {
  for (int t = 0; t < T; ++t) {
    const int64_t b = t * (a.n / 32) + 8 * sb;
    __m512i msum = _mm512_setzero_si512();
    for (int q = 0; q < 4; ++q)
      msum = _mm512_dpwssd_epi32(msum, mp[q], _mm512_set1_epi32(a.qpair[b / 2 + q]));
    const __m512 vdx = _mm512_set1_ps(a.qd[b]);
    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(tot[t]), _mm512_mul_ps(d, vdx), acc[t]);
    acc[t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum), _mm512_mul_ps(dmin, vdx), acc[t]);
  }
}

template <int T>
LLMCTL_AVX512 inline void q45_k_superblock512(const uint8_t* p, const TileArgs& a, int64_t sb,
                                              __m512* acc) {
  __m512i tot[static_cast<size_t>(T)];
  for (int t = 0; t < T; ++t) tot[t] = _mm512_setzero_si512();
  for (int j = 0; j < 8; ++j) {
    __m512i isum[static_cast<size_t>(T)];
    dots_u8_512<T, 0, 8>(p + 512 * j, a.qs + kKQuantSuperBlock * sb + 32 * j, a.n, isum);
    const __m512i sc = _mm512_srli_epi32(_mm512_loadu_si512(p + 2 * kQ45kScOffset + 64 * j), 16);
    for (int t = 0; t < T; ++t) tot[t] = _mm512_add_epi32(tot[t], _mm512_mullo_epi32(isum[t], sc));
  }
  __m512i mp[4];
  for (int q = 0; q < 4; ++q) mp[q] = _mm512_loadu_si512(p + 2 * kQ45kMinOffset + 64 * q);
  q45_k_finish512<T>(_mm512_loadu_ps(p + 2 * kQ45kDOffset),
                     _mm512_loadu_ps(p + 2 * kQ45kDminOffset), mp, a, sb, tot, acc);
}
LLMCTL_AVX512_END

#endif

// The trait: kHigh false Q4_K (144-byte super-blocks, q in 0..15), true Q5_K (176 bytes, 0..31).
template <bool kHigh>
struct KQ45_K {
  static constexpr size_t kBytes = kHigh ? 176 : 144;
  // Q5_K: the int16 and int32 partial sums of 8 tokens do not fit the 16 registers
  static constexpr int kTokens = kHigh ? 6 : 8;

  static constexpr int kActivationGroup = 256;  // one activation scale per super-block
  static constexpr bool kPairSums = true;       // the mins' madd (q45_k_finish)

  static float scalar_superblock(const uint8_t* sb, const int8_t* qx, float dx, const int32_t* xsum,
                                 float acc) {
    return q45_k_scalar_superblock(sb, kHigh, qx, dx, xsum, acc);
  }

#if defined(LLMCTL_HAVE_X86)
  static constexpr size_t kPanelBytes = kQ45kPanelBytes;
  // maddubs steps added in int16 before a madd widens them: a maddubs lane is at most
  // 2 * 15 * 127 = 3810 (Q4_K) or 2 * 31 * 127 = 7874 (Q5_K) in magnitude, so 8 (<= 30480) or
  // 4 (<= 31496) steps fit int16.
  static constexpr int kGroup = kHigh ? 4 : 8;

  // The 8 rows' block w (8 step vectors, q unsigned) against T tokens' 32 activations
  // (qx + t * n), times the rows' sub-block scales (sc16: the int16 pairs (sc, sc), the operand
  // of the madd that widens the int16 partial sums): tot[t] += the 8 rows' exact scaled sums
  // (tot[t] = them when first).
  template <int T>
  LLMCTL_AVX2 static void scaled_dots(const uint8_t* w, const int8_t* qx, int64_t n, __m256i sc16,
                                      bool first, __m256i* tot) {
    for (int g = 0; g < 8; g += kGroup) {
      __m256i p[static_cast<size_t>(T)];
      for (int s = g; s < g + kGroup; ++s) {
        const __m256i ws = kq_load(w + 32 * s);
        for (int t = 0; t < T; ++t) {
          const __m256i m = _mm256_maddubs_epi16(ws, kq_bcast4(qx + t * n + 4 * s));
          p[t] = s == g ? m : _mm256_add_epi16(p[t], m);
        }
      }
      for (int t = 0; t < T; ++t) {
        const __m256i wide = _mm256_madd_epi16(p[t], sc16);
        tot[t] = first && g == 0 ? wide : _mm256_add_epi32(tot[t], wide);
      }
    }
  }

  // The 8 rows' qs bytes 32c .. 32c + 31 (and Q5_K's qh, hb) as the weights of sub-blocks 2c
  // (w[0][s]) and 2c + 1 (w[1][s]), step s: 4 weights per row lane, q unsigned.
  LLMCTL_AVX2 static void unpack_pair(const uint8_t* const rows[8], size_t qs, int c,
                                      const __m256i hb[8], __m256i w[2][8]) {
    __m256i g[8];
    kq_transpose32(rows, qs + 32 * static_cast<size_t>(c), g);
    const __m256i low = _mm256_set1_epi8(0x0f), bit4 = _mm256_set1_epi8(0x10);
    for (int half = 0; half < 2; ++half) {
      const int j = 2 * c + half;
      // bit j to bit 4 (the 16-bit shifts keep it inside its byte)
      const __m128i sh = _mm_cvtsi32_si128(j <= 4 ? 4 - j : j - 4);
      for (int s = 0; s < 8; ++s) {
        __m256i v = _mm256_and_si256(half == 0 ? g[s] : _mm256_srli_epi16(g[s], 4), low);
        if constexpr (kHigh)
          v = _mm256_or_si256(
              v, _mm256_and_si256(
                     j <= 4 ? _mm256_sll_epi16(hb[s], sh) : _mm256_srl_epi16(hb[s], sh), bit4));
        w[half][s] = v;
      }
    }
  }

  // The int8 products of one block's 8 weight vectors w (in registers) with 32 activations,
  // times the rows' sub-block scales (sc16 as in scaled_dots).
  LLMCTL_AVX2 static __m256i scaled_dot_regs(const __m256i w[8], const int8_t* qx, __m256i sc16) {
    __m256i isum = _mm256_setzero_si256();
    for (int g = 0; g < 8; g += kGroup) {
      __m256i p = _mm256_maddubs_epi16(w[g], kq_bcast4(qx + 4 * g));
      for (int s = g + 1; s < g + kGroup; ++s)
        p = _mm256_add_epi16(p, _mm256_maddubs_epi16(w[s], kq_bcast4(qx + 4 * s)));
      isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, sc16));
    }
    return isum;
  }

  LLMCTL_AVX2 static void pack(const uint8_t* const rows[8], size_t off, uint8_t* p) {
    q45_k_scales(rows, off, p);
    __m256i hb[8];  // Q5_K qh: bit j of byte l is bit 4 of sub-block j's element l
    if constexpr (kHigh) kq_transpose32(rows, off + 16, hb);
    for (int c = 0; c < 4; ++c) {  // qs[32c..32c+32): sub-block 2c low nibbles, 2c + 1 high
      __m256i w[2][8];
      unpack_pair(rows, off + (kHigh ? 48 : 16), c, hb, w);
      for (int half = 0; half < 2; ++half)
        for (int s = 0; s < 8; ++s) kq_store(p + 256 * (2 * c + half) + 32 * s, w[half][s]);
    }
  }

  // Decode (one token): the super-block at `off` of the 8 rows straight from registers, without
  // the panel record's round trip through memory; the same integer sums and float steps as
  // pack + superblock<1>, so the same bits.
  static constexpr bool kFusedDecode = true;
  LLMCTL_AVX2 static void decode_superblock(const uint8_t* const rows[8], size_t off,
                                            const TileArgs& a, int64_t sb, __m256* acc) {
    alignas(32) uint8_t p[kQ45kPanelBytes];  // only its scales: the weights stay in registers
    q45_k_scales(rows, off, p);
    __m256i hb[8];
    if constexpr (kHigh) kq_transpose32(rows, off + 16, hb);
    __m256i tot = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {  // token 0's sub-blocks 2c, 2c + 1
      __m256i w[2][8];
      unpack_pair(rows, off + (kHigh ? 48 : 16), c, hb, w);
      for (int half = 0; half < 2; ++half) {
        const int j = 2 * c + half;
        tot = _mm256_add_epi32(tot, scaled_dot_regs(w[half], a.qs + kKQuantSuperBlock * sb + 32 * j,
                                                    kq_load(p + kQ45kScOffset + 32 * j)));
      }
    }
    q45_k_finish_panel<1>(p, a, sb, &tot, acc);
  }

  template <int T>
  LLMCTL_AVX2 static void superblock(const uint8_t* p, const TileArgs& a, int64_t sb, __m256* acc) {
    q45_k_superblock<KQ45_K, T>(p, a, sb, acc);
  }
  template <int T>
  LLMCTL_AVX512 static void superblock512(const uint8_t* p, const TileArgs& a, int64_t sb,
                                          __m512* acc) {
    q45_k_superblock512<T>(p, a, sb, acc);
  }
#endif
};

}  // namespace llmctl::cpu
