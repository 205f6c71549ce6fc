#pragma once
// Internal to the matmul fast path: the K-quant tile trait (matmul_kquant_tile.h) of Q4_K and
// Q5_K, which share d, dmin, the 12 packed bytes of 6-bit scales and mins, and the nibbles; Q5_K
// adds a fifth bit per weight (qh). matmul_q4_k.cpp and matmul_q5_k.cpp instantiate it.
//
// Arithmetic (matmul_kquant_tile.h): per 32-element sub-block j, exact isum = sum q * q_x,
//   acc = fma(float(isum), (d * sc_j) * d_x, acc);  acc = fma(-(float(xsum) * d_x), dmin * m_j,
//   acc)
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

// Block j of a Q4_K / Q5_K super-block (the scalar definition above).
inline float q45_k_scalar_block(const uint8_t* sb, bool with_high, int j, const int8_t* qx,
                                float dx, int32_t xsum, float acc) {
  int sc = 0, m = 0;
  k_scale_min(sb + 4, j, &sc, &m);
  const float ds = fp16_to_f32(load_u16_le(sb)) * static_cast<float>(sc);
  const float dm = fp16_to_f32(load_u16_le(sb + 2)) * static_cast<float>(m);
  int isum = 0;
  for (int l = 0; l < 32; ++l) isum += q45_k_value(sb, with_high, 32 * j + l) * qx[l];
  acc = std::fma(static_cast<float>(isum), ds * dx, acc);
  return std::fma(-(static_cast<float>(xsum) * dx), dm, acc);
}

#if defined(LLMCTL_HAVE_X86)
// Q4_K / Q5_K panel record (8 rows, one super-block):
//   w[8][8]  at 256 j + 32 s: block j, weights 4s..4s+3 of rows 0..7, q unsigned
//   ds[8]    at 2048 + 32 j: 8 floats, d * sc_j of each row
//   dm[8]    at 2304 + 32 j: 8 floats, dmin * m_j of each row
constexpr size_t kQ45kDsOffset = 2048, kQ45kDmOffset = 2304, kQ45kPanelBytes = 2560;

// The scales of the 8 rows' super-block at `off`: ds[8 j .. 8 j + 7] = d * sc_j of rows 0..7,
// dm likewise dmin * m_j (the panel record's ds and dm).
LLMCTL_AVX2 inline void q45_k_scales(const uint8_t* const rows[8], size_t off, float* ds,
                                     float* dm) {
  __m256i g[4];  // g[0]: d | dmin << 16; g[1..3]: scale bytes 0..3, 4..7, 8..11
  kq_transpose16(rows, off, g);
  const __m256 d = kq_fp16_lanes(g[0], false), dmin = kq_fp16_lanes(g[0], true);
  const __m256i m6 = _mm256_set1_epi8(0x3f), m4 = _mm256_set1_epi8(0x0f),
                top = _mm256_set1_epi8(0x30), byte = _mm256_set1_epi32(0xff);
  // bytes k of sc_lo / m_lo: sub-block k; of sc_hi / m_hi: sub-block 4 + k (dequant.h packing:
  // the top two bits of bytes 0..7 are bits 4..5 of the upper sub-blocks' scales and mins)
  const __m256i sc_lo = _mm256_and_si256(g[1], m6), m_lo = _mm256_and_si256(g[2], m6);
  const __m256i sc_hi = _mm256_or_si256(_mm256_and_si256(g[3], m4),
                                        _mm256_and_si256(_mm256_srli_epi32(g[1], 2), top));
  const __m256i m_hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(g[3], 4), m4),
                                       _mm256_and_si256(_mm256_srli_epi32(g[2], 2), top));
  for (int j = 0; j < 8; ++j) {
    const __m128i sh = _mm_cvtsi32_si128(8 * (j % 4));
    const __m256i sc = _mm256_and_si256(_mm256_srl_epi32(j < 4 ? sc_lo : sc_hi, sh), byte);
    const __m256i m = _mm256_and_si256(_mm256_srl_epi32(j < 4 ? m_lo : m_hi, sh), byte);
    _mm256_storeu_ps(ds + 8 * j, _mm256_mul_ps(d, _mm256_cvtepi32_ps(sc)));
    _mm256_storeu_ps(dm + 8 * j, _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(m)));
  }
}

// The panel's 8 blocks for T tokens (KQ::dots: the blocks' int8 products).
template <class KQ, int T>
LLMCTL_AVX2 inline void q45_k_superblock(const uint8_t* p, const TileArgs& a, int64_t sb,
                                         __m256* acc) {
  const int64_t nb = a.n / 32;
  for (int j = 0; j < 8; ++j) {
    const int64_t b = 8 * sb + j;
    __m256i isum[static_cast<size_t>(T)];
    KQ::template dots<T>(p + 256 * j, a.qs + 32 * b, a.n, isum);
    const __m256 ds = _mm256_loadu_ps(reinterpret_cast<const float*>(p + kQ45kDsOffset + 32 * j));
    const __m256 dm = _mm256_loadu_ps(reinterpret_cast<const float*>(p + kQ45kDmOffset + 32 * j));
    for (int t = 0; t < T; ++t) {
      const float dx = a.qd[t * nb + b];
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_mul_ps(ds, _mm256_set1_ps(dx)),
                               acc[t]);
      acc[t] =
          _mm256_fnmadd_ps(_mm256_set1_ps(static_cast<float>(a.qsum[t * nb + b]) * dx), dm, acc[t]);
    }
  }
}

// The same over a 16-row panel record (matmul_paired_tile_avx512.h: every offset doubled).
LLMCTL_AVX512_BEGIN
template <int T>
LLMCTL_AVX512 inline void q45_k_superblock512(const uint8_t* p, const TileArgs& a, int64_t sb,
                                              __m512* acc) {
  const int64_t nb = a.n / 32;
  for (int j = 0; j < 8; ++j) {
    const int64_t b = 8 * sb + j;
    __m512i isum[static_cast<size_t>(T)];
    dots_u8_512<T>(p + 512 * j, a.qs + 32 * b, a.n, 0, 8, isum);
    const __m512 ds = _mm512_loadu_ps(p + 2 * kQ45kDsOffset + 64 * j);
    const __m512 dm = _mm512_loadu_ps(p + 2 * kQ45kDmOffset + 64 * j);
    for (int t = 0; t < T; ++t) {
      const float dx = a.qd[t * nb + b];
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_mul_ps(ds, _mm512_set1_ps(dx)),
                               acc[t]);
      acc[t] =
          _mm512_fnmadd_ps(_mm512_set1_ps(static_cast<float>(a.qsum[t * nb + b]) * dx), dm, acc[t]);
    }
  }
}
LLMCTL_AVX512_END

#endif

// The trait: kHigh false Q4_K (144-byte super-blocks, q in 0..15), true Q5_K (176 bytes, 0..31).
template <bool kHigh>
struct KQ45_K {
  static constexpr size_t kBytes = kHigh ? 176 : 144;
  // Q5_K: the int16 and int32 partial sums of 8 tokens do not fit the 16 registers
  static constexpr int kTokens = kHigh ? 6 : 8;

  static float scalar_block(const uint8_t* sb, int j, const int8_t* qx, float dx, int32_t xsum,
                            float acc) {
    return q45_k_scalar_block(sb, kHigh, j, qx, dx, xsum, acc);
  }

#if defined(LLMCTL_HAVE_X86)
  static constexpr size_t kPanelBytes = kQ45kPanelBytes;
  // maddubs steps added in int16 before a madd widens them: a maddubs lane is at most
  // 2 * 15 * 127 = 3810 (Q4_K) or 2 * 31 * 127 = 7874 (Q5_K) in magnitude, so 8 (<= 30480) or
  // 4 (<= 31496) steps fit int16.
  static constexpr int kGroup = kHigh ? 4 : 8;

  // The 8 rows' block w (8 step vectors, q unsigned) against T tokens' 32 activations
  // (qx + t * n): isum[t], the 8 rows' exact sums.
  template <int T>
  LLMCTL_AVX2 static void dots(const uint8_t* w, const int8_t* qx, int64_t n, __m256i* isum) {
    const __m256i ones = _mm256_set1_epi16(1);
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
        const __m256i wide = _mm256_madd_epi16(p[t], ones);
        isum[t] = g == 0 ? wide : _mm256_add_epi32(isum[t], wide);
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

  // The int8 products of one block's 8 weight vectors w (in registers) with 32 activations.
  LLMCTL_AVX2 static __m256i dot_regs(const __m256i w[8], const int8_t* qx) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i isum = _mm256_setzero_si256();
    for (int g = 0; g < 8; g += kGroup) {
      __m256i p = _mm256_maddubs_epi16(w[g], kq_bcast4(qx + 4 * g));
      for (int s = g + 1; s < g + kGroup; ++s)
        p = _mm256_add_epi16(p, _mm256_maddubs_epi16(w[s], kq_bcast4(qx + 4 * s)));
      isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, ones));
    }
    return isum;
  }

  LLMCTL_AVX2 static void pack(const uint8_t* const rows[8], size_t off, uint8_t* p) {
    q45_k_scales(rows, off, reinterpret_cast<float*>(p + kQ45kDsOffset),
                 reinterpret_cast<float*>(p + kQ45kDmOffset));
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
    alignas(32) float ds[64], dm[64];
    q45_k_scales(rows, off, ds, dm);
    __m256i hb[8];
    if constexpr (kHigh) kq_transpose32(rows, off + 16, hb);
    for (int c = 0; c < 4; ++c) {  // token 0's blocks: a.qd[b], a.qsum[b]
      __m256i w[2][8];
      unpack_pair(rows, off + (kHigh ? 48 : 16), c, hb, w);
      for (int half = 0; half < 2; ++half) {
        const int j = 2 * c + half;
        const int64_t b = 8 * sb + j;
        const __m256i isum = dot_regs(w[half], a.qs + 32 * b);
        const float dx = a.qd[b];
        acc[0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum),
                                 _mm256_mul_ps(_mm256_load_ps(ds + 8 * j), _mm256_set1_ps(dx)),
                                 acc[0]);
        acc[0] = _mm256_fnmadd_ps(_mm256_set1_ps(static_cast<float>(a.qsum[b]) * dx),
                                  _mm256_load_ps(dm + 8 * j), acc[0]);
      }
    }
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
