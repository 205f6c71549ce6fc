#pragma once
// Internal to the matmul fast path: the tile kernel for block-quantized weights (Q8_0, Q4_0,
// Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4) against int8 activations (quantize_activations.h), written
// once over a block trait.
//
// Arithmetic (the contract the scalar and the AVX2 kernel share, bit for bit): for each
// (row r, token t), over the row's 32-element blocks b in order, starting from acc = 0:
//   isum = sum_j q_w[j] * q_x[j]                       exact in int32
//   acc  = fma(float(isum), d_w * d_x, acc)
//   Q4_1, Q5_1 (w = q * d + m) then: acc = fma(float(xsum) * d_x, m, acc), xsum = sum_j q_x[j]
// and out[t][r] = acc. The integer weights are Q8_0 q, Q4_0 q - 8, Q4_1 q, Q5_0 q - 16, Q5_1 q
// (Q5: the nibble plus bit j of qh as bit 4), IQ4_NL kIq4nlValues[q]; d_w is the block's fp16
// d.
//
// Rows are the SIMD lanes: a tile is 8 rows (fewer at the end of a range: the missing rows
// repeat the last one and are not stored) x T tokens. For each block the 8 rows' weight bytes
// are transposed in registers so that one 32-byte vector holds 4 consecutive weights of each
// row; maddubs against the token's 4 activation bytes broadcast to every row then gives, after
// 8 such steps and one madd, the 8 rows' isum in the 8 int32 lanes. One float conversion and
// one fma serve 8 (row, token) pairs, where a lane-per-element layout needs one per pair.
// Decode transposes each block in registers as it reads the GGUF layout in place; prefill
// transposes each 8-row tile once per chunk of tokens into a per-thread panel (pack()) that
// the chunk's token tiles then read. The weights are never copied at load.
//
// Block traits (a trait derives from QuantBlockTraits and overrides what its type has):
//   Block::kBytes, kQsOffset     bytes per block, offset of the quants (after d, and Q4_1's m)
//   Block::kNibbles              4-bit quants (byte j: element j low, element j + 16 high)
//   Block::kOffset8              integer weight is q minus half its range: q - 8 (Q4_0), with
//                                kHighBit q - 16 (Q5_0); isum = sum q*x - offset * xsum
//   Block::kHasMin               Q4_1, Q5_1: fp16 m at byte 2
//   Block::kHighBit, kQhOffset   Q5_0, Q5_1: nibble blocks whose element j has a fifth bit,
//                                bit j of the u32 (LE) at kQhOffset
//   Block::kLookup, kTable       IQ4_NL, MXFP4: the nibble indexes the 16-entry int8
//                                table kTable (kIq4nlValues, kMxfp4Values: dequant.h); the
//                                integer weight is its entry (signed, as Q8_0's q)
//   Block::kE8m0                 MXFP4: d_w is the E8M0 byte at 0 halved, 2^(e - 128)
//                                (e8m0_half_to_f32), not an fp16 (exact; as ggml's scale)
//   Block::kLevelBias            MXFP4 12: its levels + 12 are 0..24, so the AVX2 tiles take
//                                them as unsigned weights (as Q4_0's nibbles: no sign steps)
//                                and isum = sum (level + 12) * x - 12 * xsum. IQ4_NL's levels
//                                (-127..113) would overflow maddubs' int16 pairs: 0, signed.
// (IQ4_XS, whose 32-element sub-blocks have integer scales within a 256-element super-block,
// is a K-quant tile: matmul_iq4_xs.cpp.)

#include <algorithm>
#include <cstring>

#include "backend/cpu/matmul_kernels.h"
#include "quant/dequant.h"

namespace llmctl::cpu {

struct QuantBlockTraits {
  static constexpr bool kOffset8 = false;
  static constexpr bool kHasMin = false;
  static constexpr bool kHighBit = false;
  static constexpr size_t kQhOffset = 0;
  static constexpr bool kLookup = false;
  static constexpr const int8_t* kTable = kIq4nlValues;
  static constexpr bool kE8m0 = false;
  static constexpr int kLevelBias = 0;
};

// The offset subtracted from q (kOffset8 above).
template <class Block>
constexpr int quant_offset() {
  return Block::kOffset8 ? (Block::kHighBit ? 16 : 8) : 0;
}

// Whether the AVX2 tiles take the integer weights as signed (Q8_0, IQ4_NL): they multiply |q|
// with the activations carrying q's sign, where unsigned weights (nibbles 0..31, MXFP4's
// levels + kLevelBias) multiply them directly.
template <class Block>
constexpr bool quant_signed() {
  return !Block::kNibbles || (Block::kLookup && Block::kLevelBias == 0);
}

// What the AVX2 tiles take off isum per unit of xsum: quant_offset(), or a lookup's kLevelBias.
template <class Block>
constexpr int quant_avx2_offset() {
  if constexpr (Block::kLookup && Block::kLevelBias != 0) {
    for (int i = 0; i < 16; ++i)  // unsigned, and a maddubs pair within int16: 2 * 128 * 127
      if (Block::kTable[i] + Block::kLevelBias < 0 || Block::kTable[i] + Block::kLevelBias > 128)
        throw "kLevelBias must bring every level into 0..128";  // a compile error (constexpr)
    return Block::kLevelBias;
  }
  return quant_offset<Block>();
}

// Block's level table + kLevelBias in both 128-bit lanes (pshufb's), for the AVX2 tiles.
#if defined(LLMCTL_HAVE_X86)
template <class Block>
LLMCTL_AVX2 inline __m256i lookup_table_256() {
  const __m256i t =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(Block::kTable)));
  return quant_signed<Block>() ? t : _mm256_add_epi8(t, _mm256_set1_epi8(Block::kLevelBias));
}
#endif

// Byte offset in a row of 32-element block b, and of b's quants.
template <class Block>
size_t quant_block_offset(int64_t b) {
  return static_cast<size_t>(b) * Block::kBytes;
}
template <class Block>
size_t quant_qs_offset(int64_t b) {
  return quant_block_offset<Block>(b) + Block::kQsOffset;
}

constexpr int kQuantTileRows = 8;
// Tokens per prefill tile: T accumulators and T int sums stay in registers while the packed
// weights stream from L1/L2 (1 thread, 256 tokens, 2048x2048: Q4_0 T = 4 / 6 / 8 gave 116 /
// 134 / 149 GFLOP/s; Q8_0, whose sign vectors take registers too, 86 / 112 / 109).
template <class Block>
constexpr int quant_tile_tokens() {
  return quant_signed<Block>() ? 6 : 8;
}

// The integer weight j of 32-element block b of a row (scalar; the definition the AVX2
// kernel must match).
template <class Block>
inline int quant_weight(const uint8_t* row, int64_t b, int j) {
  const uint8_t* q = row + quant_qs_offset<Block>(b);
  if constexpr (Block::kLookup) {
    return Block::kTable[j < 16 ? (q[j] & 0x0f) : (q[j - 16] >> 4)];
  } else if constexpr (Block::kHighBit) {
    return q5_value(row + quant_block_offset<Block>(b) + Block::kQhOffset, q, j) -
           quant_offset<Block>();
  } else if constexpr (Block::kNibbles) {
    return (j < 16 ? (q[j] & 0x0f) : (q[j - 16] >> 4)) - quant_offset<Block>();
  } else {
    return static_cast<int8_t>(q[j]);
  }
}

// d_w of 32-element block b of a row: the fp16 d (MXFP4: the E8M0 scale).
template <class Block>
inline float quant_scale(const uint8_t* row, int64_t b) {
  const uint8_t* blk = row + quant_block_offset<Block>(b);
  if constexpr (Block::kE8m0) return e8m0_half_to_f32(blk[0]);
  return fp16_to_f32(load_u16_le(blk));
}

template <class Block>
struct QuantTileAvx2;  // x86 only (below)

template <class Block>
struct QuantTileScalar {
  template <int T>
  static void tile(const TileArgs& a, int n_rows) {
    const int64_t nb = a.n / 32;
    for (int r = 0; r < n_rows; ++r) {
      const uint8_t* row = a.w + static_cast<size_t>(r) * a.w_stride;
      for (int t = 0; t < T; ++t) {
        float acc = 0.0f;
        for (int64_t b = 0; b < nb; ++b) {
          const int8_t* qx = a.qs + t * a.n + 32 * b;
          int isum = 0;
          for (int j = 0; j < 32; ++j) isum += quant_weight<Block>(row, b, j) * qx[j];
          const float dx = a.qd[t * nb + b];
          acc = std::fma(static_cast<float>(isum), quant_scale<Block>(row, b) * dx, acc);
          if constexpr (Block::kHasMin)
            acc = std::fma(static_cast<float>(a.qsum[t * nb + b]) * dx,
                           fp16_to_f32(load_u16_le(row + quant_block_offset<Block>(b) + 2)), acc);
        }
        a.out[t * a.out_stride + r] = acc;
      }
    }
  }
};

#if defined(LLMCTL_HAVE_X86)
// 4x4 transpose of 32-bit elements within each 128-bit lane: in v[i] = (row i dword 0..3 |
// row i+4 dword 0..3); out g[k] = (rows 0..3 dword k | rows 4..7 dword k).
LLMCTL_AVX2 inline void transpose_dwords_4x4(const __m256i v[4], __m256i g[4]) {
  const __m256i t0 = _mm256_unpacklo_epi32(v[0], v[1]);
  const __m256i t1 = _mm256_unpackhi_epi32(v[0], v[1]);
  const __m256i t2 = _mm256_unpacklo_epi32(v[2], v[3]);
  const __m256i t3 = _mm256_unpackhi_epi32(v[2], v[3]);
  g[0] = _mm256_unpacklo_epi64(t0, t2);
  g[1] = _mm256_unpackhi_epi64(t0, t2);
  g[2] = _mm256_unpacklo_epi64(t1, t3);
  g[3] = _mm256_unpackhi_epi64(t1, t3);
}

// The 8 rows of a tile (rows past n_rows repeat the last one; their lanes are not stored).
inline void lane_tile_rows(const TileArgs& a, int n_rows, const uint8_t* rows[8]) {
  for (int r = 0; r < 8; ++r)
    rows[r] = a.w + static_cast<size_t>(r < n_rows ? r : n_rows - 1) * a.w_stride;
}

// Token t's accumulator (lane r: row r) into out, n_rows lanes.
LLMCTL_AVX2 inline void store_lane_tile(const TileArgs& a, int n_rows, int t, __m256 acc) {
  alignas(32) float v[8];
  _mm256_store_ps(v, acc);
  for (int r = 0; r < n_rows; ++r) a.out[t * a.out_stride + r] = v[r];
}

LLMCTL_AVX2 inline __m256i load_two_rows(const uint8_t* lo, const uint8_t* hi) {
  return _mm256_inserti128_si256(
      _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(lo))),
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(hi)), 1);
}

// The u32 (LE) at byte offset `off` of each of 8 rows, as 8 dwords.
LLMCTL_AVX2 inline __m256i gather_u32(const uint8_t* const rows[8], size_t off) {
  int32_t v[8];
  for (int r = 0; r < 8; ++r) std::memcpy(&v[r], rows[r] + off, 4);
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(v));
}

template <class Block>
struct QuantTileAvx2 {
  // One block of the 8 rows, transposed (the panel layout; a prefill panel is nb of these):
  //   w[8]    32 bytes each: weights 4s..4s+3 of rows 0..7 (4 bytes per row, row order);
  //           unsigned blocks: q in 0..31 (the unsigned operand of maddubs); signed: |q|
  //   sgn[8]  signed blocks only (Q8_0, IQ4): q itself (its sign goes onto the activations)
  //   dw      8 floats: the rows' scales;  mw  Q4_1, Q5_1 only: 8 floats, the rows' mins
  static constexpr bool kSigned = quant_signed<Block>();
  // Unsigned nibbles (0..15): a maddubs lane is at most 3810, 8 steps add up in int16.
  static constexpr bool kInt16Sum = Block::kNibbles && !Block::kHighBit && !Block::kLookup;
  static constexpr size_t kSgnOffset = 256;
  static constexpr size_t kDwOffset = kSigned ? 512 : 256;
  static constexpr size_t kMwOffset = kDwOffset + 32;
  static constexpr size_t kPanelBlockBytes = kMwOffset + (Block::kHasMin ? 32 : 0);

  LLMCTL_AVX2 static void store(uint8_t* p, __m256i v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v);
  }
  LLMCTL_AVX2 static __m256i load(const uint8_t* p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  }
  // The fp16 at byte offset `off` of each row, as 8 floats.
  LLMCTL_AVX2 static __m256 gather_fp16(const uint8_t* const rows[8], size_t off) {
    return _mm256_cvtph_ps(_mm_setr_epi16(static_cast<short>(load_u16_le(rows[0] + off)),
                                          static_cast<short>(load_u16_le(rows[1] + off)),
                                          static_cast<short>(load_u16_le(rows[2] + off)),
                                          static_cast<short>(load_u16_le(rows[3] + off)),
                                          static_cast<short>(load_u16_le(rows[4] + off)),
                                          static_cast<short>(load_u16_le(rows[5] + off)),
                                          static_cast<short>(load_u16_le(rows[6] + off)),
                                          static_cast<short>(load_u16_le(rows[7] + off))));
  }

  // Q5: ORs 16 into w[s] byte (4r + i) where element 4s + i (s < 4; s >= 4: 16 + 4(s - 4) + i)
  // of row r has its qh bit set. Dword r of h holds row r's qh; the byte of it that holds
  // the step's 4 bits is copied to the 4 bytes of the dword, and each byte tests its own bit.
  LLMCTL_AVX2 static void add_high_bits(const uint8_t* const rows[8], size_t qh_off, __m256i w[8]) {
    const __m256i h = gather_u32(rows, qh_off);
    const __m256i bit4 = _mm256_set1_epi8(0x10);
    for (int s = 0; s < 8; ++s) {
      const int byte = s / 2, shift = 4 * (s % 2);  // bits 4s..4s+3 of the u32
      const char b = static_cast<char>(byte);
      const __m256i spread = _mm256_shuffle_epi8(
          h, _mm256_setr_epi8(b, b, b, b, b + 4, b + 4, b + 4, b + 4, b + 8, b + 8, b + 8, b + 8,
                              b + 12, b + 12, b + 12, b + 12, b, b, b, b, b + 4, b + 4, b + 4,
                              b + 4, b + 8, b + 8, b + 8, b + 8, b + 12, b + 12, b + 12, b + 12));
      const __m256i mask = _mm256_set1_epi32(static_cast<int>(0x08040201u << shift));
      const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, mask), mask);
      w[s] = _mm256_or_si256(w[s], _mm256_and_si256(set, bit4));
    }
  }

  // One block of the 8 rows in registers (the fields of the panel layout above).
  struct Unpacked {
    __m256i w[8], sgn[8];
    __m256 dw, mw;
  };

  // The 8 rows' d_w of 32-element block b (quant_scale).
  LLMCTL_AVX2 static __m256 gather_scale(const uint8_t* const rows[8], int64_t b) {
    const size_t blk = quant_block_offset<Block>(b);
    if constexpr (Block::kE8m0) {
      alignas(32) float v[8];
      for (int r = 0; r < 8; ++r) v[r] = e8m0_half_to_f32(rows[r][blk]);
      return _mm256_load_ps(v);
    }
    return gather_fp16(rows, blk);
  }

  // 32-element block b of the 8 rows.
  LLMCTL_AVX2 static void unpack_block(const uint8_t* const rows[8], int64_t b, Unpacked& u) {
    const size_t blk = quant_block_offset<Block>(b);
    const size_t off = quant_qs_offset<Block>(b);
    __m256i v[4], g[4];
    u.mw = _mm256_setzero_ps();
    if constexpr (Block::kNibbles) {
      for (int i = 0; i < 4; ++i) v[i] = load_two_rows(rows[i] + off, rows[i + 4] + off);
      transpose_dwords_4x4(v, g);
      const __m256i low = _mm256_set1_epi8(0x0f);
      for (int k = 0; k < 4; ++k) {
        u.w[k] = _mm256_and_si256(g[k], low);                            // elements 4k..4k+3
        u.w[k + 4] = _mm256_and_si256(_mm256_srli_epi16(g[k], 4), low);  // 16 + 4k ..
      }
      if constexpr (Block::kHighBit) add_high_bits(rows, blk + Block::kQhOffset, u.w);
      if constexpr (Block::kLookup) {
        // the table's level for each nibble (pshufb: 16 entries, in both 128-bit lanes);
        // signed: |level| and the level's sign, else level + kLevelBias
        const __m256i table = lookup_table_256<Block>();
        for (int k = 0; k < 8; ++k) {
          u.sgn[k] = _mm256_shuffle_epi8(table, u.w[k]);
          u.w[k] = kSigned ? _mm256_sign_epi8(u.sgn[k], u.sgn[k]) : u.sgn[k];
        }
      } else {
        for (int k = 0; k < 8; ++k) u.sgn[k] = u.w[k];  // unused by unsigned blocks
      }
    } else {
      for (int half = 0; half < 2; ++half) {
        for (int i = 0; i < 4; ++i)
          v[i] = load_two_rows(rows[i] + off + 16 * half, rows[i + 4] + off + 16 * half);
        transpose_dwords_4x4(v, g);
        for (int k = 0; k < 4; ++k) {
          u.sgn[4 * half + k] = g[k];
          u.w[4 * half + k] = _mm256_sign_epi8(g[k], g[k]);
        }
      }
    }
    u.dw = gather_scale(rows, b);
    if constexpr (Block::kHasMin) u.mw = gather_fp16(rows, blk + 2);
  }

  LLMCTL_AVX2 static void pack_block(const uint8_t* const rows[8], int64_t b, uint8_t* out) {
    Unpacked u;
    unpack_block(rows, b, u);
    store_block(u, out);
  }

  // A block in registers into its panel layout at out.
  LLMCTL_AVX2 static void store_block(const Unpacked& u, uint8_t* out) {
    for (size_t s = 0; s < 8; ++s) {
      store(out + 32 * s, u.w[s]);
      if constexpr (kSigned) store(out + kSgnOffset + 32 * s, u.sgn[s]);
    }
    _mm256_storeu_ps(reinterpret_cast<float*>(out + kDwOffset), u.dw);
    if constexpr (Block::kHasMin) _mm256_storeu_ps(reinterpret_cast<float*>(out + kMwOffset), u.mw);
  }

  // Step s of a block for one token: sum += the 8 rows' products with activations 4s..4s+3.
  LLMCTL_AVX2 static __m256i step(__m256i sum, __m256i w, __m256i sgn, const int8_t* qx, int s) {
    __m256i x = _mm256_set1_epi32(load_i32(qx + 4 * s));
    if constexpr (kSigned) x = _mm256_sign_epi8(x, sgn);  // |q| * sign(x, q)
    const __m256i p = _mm256_maddubs_epi16(w, x);
    if constexpr (kInt16Sum) {
      // q in 0..15, |x| <= 127: each int16 lane of a maddubs is <= 3810 in magnitude, so
      // the 8 steps add up in int16 without overflow (<= 30480) before one madd.
      return s == 0 ? p : _mm256_add_epi16(sum, p);
    } else {
      // Q5 (q <= 31: a lane reaches 7874) and the signed blocks (a pair of products reaches
      // 32512): 8 steps would overflow int16, so every step is widened.
      const __m256i p32 = _mm256_madd_epi16(p, _mm256_set1_epi16(1));
      return s == 0 ? p32 : _mm256_add_epi32(sum, p32);
    }
  }

  // The block's contribution to one token's accumulator (8 rows), from its 8 step sums.
  LLMCTL_AVX2 static __m256 finish(__m256i sum, __m256 dw, __m256 mw, const TileArgs& a, int64_t tb,
                                   __m256 acc) {
    if constexpr (kInt16Sum) sum = _mm256_madd_epi16(sum, _mm256_set1_epi16(1));
    if constexpr (quant_avx2_offset<Block>() != 0)
      sum = _mm256_sub_epi32(sum, _mm256_set1_epi32(quant_avx2_offset<Block>() * a.qsum[tb]));
    acc =
        _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(dw, _mm256_set1_ps(a.qd[tb])), acc);
    if constexpr (Block::kHasMin)
      acc = _mm256_fmadd_ps(_mm256_set1_ps(static_cast<float>(a.qsum[tb]) * a.qd[tb]), mw, acc);
    return acc;
  }

  LLMCTL_AVX2 static void pack(const TileArgs& a, int n_rows, uint8_t* panel) {
    const uint8_t* rows[8];
    lane_tile_rows(a, n_rows, rows);
    for (int64_t b = 0; b < a.n / 32; ++b)
      pack_block(rows, b, panel + static_cast<size_t>(b) * kPanelBlockBytes);
  }

  // acc[t] (8 rows) over block b of T tokens, from the packed block pb.
  template <int T>
  LLMCTL_AVX2 static void block(const uint8_t* pb, const TileArgs& a, int64_t b, __m256* acc) {
    const int64_t nb = a.n / 32;
    __m256i sums[static_cast<size_t>(T)];
    for (int t = 0; t < T; ++t) sums[t] = _mm256_setzero_si256();  // step 0 overwrites them
    for (int s = 0; s < 8; ++s) {
      const __m256i w = load(pb + 32 * s);
      const __m256i sgn = kSigned ? load(pb + kSgnOffset + 32 * s) : w;
      for (int t = 0; t < T; ++t) sums[t] = step(sums[t], w, sgn, a.qs + t * a.n + 32 * b, s);
    }
    const __m256 dw = _mm256_loadu_ps(reinterpret_cast<const float*>(pb + kDwOffset));
    const __m256 mw = Block::kHasMin
                          ? _mm256_loadu_ps(reinterpret_cast<const float*>(pb + kMwOffset))
                          : _mm256_setzero_ps();
    for (int t = 0; t < T; ++t) acc[t] = finish(sums[t], dw, mw, a, t * nb + b, acc[t]);
  }

  // acc[t] (8 rows) over block b of T tokens, from the block in registers (decode).
  template <int T>
  LLMCTL_AVX2 static void block_unpacked(const Unpacked& u, const TileArgs& a, int64_t b,
                                         __m256* acc) {
    const int64_t nb = a.n / 32;
    for (int t = 0; t < T; ++t) {
      const int8_t* qx = a.qs + t * a.n + 32 * b;
      __m256i sum = _mm256_setzero_si256();
      for (int st = 0; st < 8; ++st) sum = step(sum, u.w[st], u.sgn[st], qx, st);
      acc[t] = finish(sum, u.dw, u.mw, a, t * nb + b, acc[t]);
    }
  }

  template <int T>
  LLMCTL_AVX2 static void tile(const TileArgs& a, int n_rows) {
    const int64_t nb = a.n / 32;
    __m256 acc[static_cast<size_t>(T)];
    for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
    if (a.panel != nullptr) {
      for (int64_t b = 0; b < nb; ++b)
        block<T>(a.panel + static_cast<size_t>(b) * kPanelBlockBytes, a, b, acc);
    } else {
      const uint8_t* rows[8];
      lane_tile_rows(a, n_rows, rows);
      const char* next_tile = reinterpret_cast<const char*>(a.w + 8 * a.w_stride);
      constexpr size_t kRowBytes32 = Block::kBytes;  // bytes of a row per 32-element block
      for (int64_t b = 0; b < nb; ++b) {
        if constexpr (T == 1) {
          // Decode streams each weight byte once, and the next tile's 8 rows are the next
          // stretch of memory: prefetch it at the pace this tile is read, so that the next
          // tile does not start with 8 cold streams the hardware prefetcher has not learned.
          const size_t pos = static_cast<size_t>(b) * kRowBytes32;
          for (size_t off = 0; off < 8 * kRowBytes32; off += 64)
            _mm_prefetch(next_tile + 8 * pos + off, _MM_HINT_T1);
        }
        Unpacked u;
        unpack_block(rows, b, u);
        block_unpacked<T>(u, a, b, acc);
      }
    }
    for (int t = 0; t < T; ++t) store_lane_tile(a, n_rows, t, acc[t]);
  }

  static int32_t load_i32(const int8_t* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
};
#endif

// K's tile for a token tile of n_tokens, 1 to 8 (MatmulKernel::tokens_prefill is at most 8).
template <class K>
void dispatch_quant_tile(const TileArgs& a, int n_rows, int n_tokens) {
  using Tile = void (*)(const TileArgs&, int);
  static constexpr Tile kTiles[] = {
      &K::template tile<1>, &K::template tile<2>, &K::template tile<3>, &K::template tile<4>,
      &K::template tile<5>, &K::template tile<6>, &K::template tile<7>, &K::template tile<8>};
  kTiles[std::clamp(n_tokens, 1, 8) - 1](a, n_rows);
}

// The MatmulKernel of a rows-as-lanes tile pair over a trait (this file's blocks, the
// K-quants of matmul_kquant_tile.h): Avx2<Trait> (tile, pack, kPanelBlockBytes) when asked for
// and compiled for x86, else Scalar<Trait>; `tokens` (1..8) per prefill tile.
template <template <class> class Scalar, template <class> class Avx2, class Trait>
MatmulKernel make_lane_kernel(bool avx2, const char* avx2_name, const char* scalar_name,
                              int tokens) {
  MatmulKernel k;
  k.quantized = true;
  k.rows_decode = kQuantTileRows;
  k.rows_prefill = kQuantTileRows;
  k.tokens_prefill = tokens;  // dispatch_quant_tile handles 1..8
#if defined(LLMCTL_HAVE_X86)
  if (avx2) {
    k.name = avx2_name;
    k.tile = &dispatch_quant_tile<Avx2<Trait>>;
    k.pack = &Avx2<Trait>::pack;
    k.panel_bytes_per_block = Avx2<Trait>::kPanelBlockBytes;
    return k;
  }
#endif
  (void)avx2;
  (void)avx2_name;
  k.name = scalar_name;
  k.tile = &dispatch_quant_tile<Scalar<Trait>>;
  return k;
}

// The MatmulKernel of a block type: AVX2 when asked for (and compiled for x86), else scalar.
template <class Block>
MatmulKernel make_quant_kernel(bool avx2, const char* avx2_name, const char* scalar_name) {
  static_assert(quant_tile_tokens<Block>() <= 8, "dispatch_quant_tile handles 1..8 tokens");
  return make_lane_kernel<QuantTileScalar, QuantTileAvx2, Block>(avx2, avx2_name, scalar_name,
                                                                 quant_tile_tokens<Block>());
}

}  // namespace llmctl::cpu
