#pragma once
// Internal to the matmul fast path: the AVX-512 VNNI tiles over the repacked 32-element block
// types Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL and MXFP4 (the AVX2 ones:
// matmul_repacked_quant_tile_avx2.h)
// (weight_repack.h: 16-row groups, one record of the 16 rows' scales and pre-transposed quants
// per 32-element block), for a CPU with matmul_fast_has_avx512(). Same arithmetic contract as
// the in-place tiles (matmul_quant_tile.h), so the same bits as the scalar kernel:
//   isum = sum_j q_w[j] * q_x[j] exact in int32;  acc = fma(float(isum), d_w * d_x, acc)
//   Q4_1, Q5_1 then acc = fma(float(xsum) * d_x, m, acc)
//
// The in-place decode tile gathers the 16 rows' blocks (16 streams, a 4x4 dword transpose and
// a scale gather per block; Q5: an 8-row AVX2 tile with a byte spread and compare per step
// for the fifth bits); here a tile reads one sequential stream with plain loads, and each
// 64-byte vector goes to vpdpbusd as it is (nibbles: after a mask or a shift and a mask; Q5:
// the step's fifth bits, bit s of every byte of the record's qh vector, shifted to bit 4 and
// merged with one ternlog; IQ4_NL and MXFP4: the nibbles looked up in their level table + 128,
// one vpshufb). Weights offset by half their range (Q4_0 q - 8, Q5_0 q - 16; Q8_0, stored q +
// 128; the levels + 128) multiply unsigned, then isum = vpdpbusd sum - offset * sum(x block),
// exact.
// One tile serves decode (T = 1) and prefill (T <= 8 tokens against the group, L2-resident
// while the token chunk passes): no packing step, except Q5's (pack below).
//
// Addressing: TileArgs::w_stride = a sixteenth of a group's bytes; the tile of row r (a
// multiple of 16: rows_per_task() is one) starts at w + r * w_stride, its group's first record.

#include <cstring>

#include "backend/cpu/matmul_quant_tile_avx512.h"
#include "backend/cpu/weight_repack.h"

namespace llmctl::cpu {

// Software prefetch (here and matmul_repacked_quant_tile_avx2.h): TileArgs::prefetch bytes ahead
// of each record the tile reads, decode and the small batches that read records alike; none
// on AMD, where the hardware prefetchers follow a 16-row group's one sequential stream best,
// and kKQuantPrefetchBytes on Intel, where they leave one core at 0.65x to 0.8x of its speed
// (decode_prefetch_bytes in matmul_kernels.h has the measurements). Not over a packed panel:
// that reads the records' scales only.

#if defined(LLMCTL_HAVE_X86)
LLMCTL_AVX512_BEGIN

// The record of a Block (the in-place block trait of matmul_quant_tile.h) of a type with a
// 16-row layout: the same bytes as the 16 rows' blocks.
template <class Block>
constexpr Q16Record repacked_record() {
  constexpr Q16Record r =
      q16_record(Block::kHasMin, Block::kHighBit, Block::kNibbles, Block::kE8m0);
  static_assert(r.bytes == 16 * Block::kBytes, "a record is the 16 rows' blocks");
  return r;
}

// MXFP4's block scale from E8M0 bytes e (as int32 lanes), exactly e8m0_half_to_f32 of
// quant/dequant.h: the bits (e - 1) << 23, and 0x00200000 << e for the denormals of e = 0, 1.
LLMCTL_AVX512 inline __m512 e8m0_half_x16(const uint8_t* e8) {
  const __m512i e = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(e8)));
  const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
  const __mmask16 denormal = _mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(2));
  return _mm512_castsi512_ps(
      _mm512_mask_sllv_epi32(normal, denormal, _mm512_set1_epi32(0x00200000), e));
}

// The integer correction per block of a repacked Block: offset x the activation block's sum
// (Q4_0 8, Q5_0 16; Q8_0's q + 128 and the levels + 128 of IQ4_NL, MXFP4: 128; Q4_1, Q5_1
// none).
template <class Block>
constexpr int32_t repacked_offset() {
  return Block::kNibbles && !Block::kLookup ? quant_offset<Block>() : 128;
}

// Step s's fifth bits (bit s of each byte of a record's qh, weight_repack.h) at bit 4 of each
// byte, other bits arbitrary: 16-bit shifts by at most 4, so bit 4 of either byte of a word
// comes from its own byte. Template: the shift counts are immediates.
template <int S>
LLMCTL_AVX512 inline __m512i fifth_bits_512(__m512i qh) {
  if constexpr (S < 4) return _mm512_slli_epi16(qh, 4 - S);
  if constexpr (S > 4) return _mm512_srli_epi16(qh, S - 4);
  return qh;
}

template <class Block>
struct RepackedQuantTile {
  static constexpr Q16Record kRec = repacked_record<Block>();
  static constexpr int32_t kOffset = repacked_offset<Block>();

  // The weights of steps k (low nibbles) and 4 + k (high nibbles) of record rec, as unsigned
  // bytes (Q5: with their fifth bit, from qh; IQ4_NL, MXFP4: the level + 128 of each nibble).
  template <int K>
  LLMCTL_AVX512 static void nibble_steps(const uint8_t* rec, __m512i qh, __m512i& lo,
                                         __m512i& hi) {
    const __m512i low = _mm512_set1_epi8(0x0f);
    const __m512i v = _mm512_loadu_si512(rec + kRec.q + 64 * K);
    lo = _mm512_and_si512(v, low);                         // 4k .. 4k + 3
    hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);  // 16 + 4k ..
    if constexpr (Block::kHighBit) {
      const __m512i bit4 = _mm512_set1_epi8(0x10);
      // lo | (bits & 0x10): ternlog truth table A | (B & C) = 0xf8
      lo = _mm512_ternarylogic_epi32(lo, fifth_bits_512<K>(qh), bit4, 0xf8);
      hi = _mm512_ternarylogic_epi32(hi, fifth_bits_512<4 + K>(qh), bit4, 0xf8);
    } else {
      (void)qh;
    }
    if constexpr (Block::kLookup) {  // the table in each 128-bit lane, + 128 (unsigned)
      const __m512i table = _mm512_xor_si512(
          _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(Block::kTable))),
          _mm512_set1_epi8(static_cast<char>(0x80)));
      lo = _mm512_shuffle_epi8(table, lo);
      hi = _mm512_shuffle_epi8(table, hi);
    }
  }

  // sum[t] += step k and 4 + k of T tokens (qx: token 0's block, stride n).
  template <int T, int K>
  LLMCTL_AVX512 static void nibble_dots(const uint8_t* rec, __m512i qh, const int8_t* qx,
                                        int64_t n, __m512i* sum) {
    __m512i lo, hi;
    nibble_steps<K>(rec, qh, lo, hi);
    for (int t = 0; t < T; ++t) {
      sum[t] = dot4_u8s8_bcast(sum[t], lo, qx + t * n + 4 * K);
      sum[t] = dot4_u8s8_bcast(sum[t], hi, qx + t * n + 4 * (K + 4));
    }
  }

  // Q5 prefill packs (MatmulKernel::pack) a chunk of 3 token tiles or more, as the AVX2 tile
  // does: the 8 steps' weights with their fifth bits, 64 bytes each (kPanelBlockBytes a
  // block), unpacked once per chunk instead of once per token tile (3 instructions a step);
  // the scales stay in the record. 1.01x to 1.10x at 512 tokens, and then 0.95x to 1.04x the
  // in-place kernel (2 threads, 576x576 .. 2048x2048). IQ4_NL and MXFP4 likewise (lookups).
  static constexpr bool kPacks = Block::kHighBit || Block::kLookup;
  static constexpr size_t kPanelBlockBytes = 8 * 64;
  template <int K>
  LLMCTL_AVX512 static void pack_steps(const uint8_t* rec, __m512i qh, uint8_t* out) {
    __m512i lo, hi;
    nibble_steps<K>(rec, qh, lo, hi);
    _mm512_storeu_si512(out + 64 * K, lo);
    _mm512_storeu_si512(out + 64 * (4 + K), hi);
  }
  LLMCTL_AVX512 static void pack(const TileArgs& a, int, uint8_t* panel) {
    for (int64_t b = 0; b < a.n / 32; ++b) {
      const uint8_t* rec = a.w + static_cast<size_t>(b) * kRec.bytes;
      const __m512i qh = _mm512_loadu_si512(rec + kRec.qh);
      uint8_t* out = panel + static_cast<size_t>(b) * kPanelBlockBytes;
      pack_steps<0>(rec, qh, out);
      pack_steps<1>(rec, qh, out);
      pack_steps<2>(rec, qh, out);
      pack_steps<3>(rec, qh, out);
    }
  }

  // The 16 rows' d_w of record rec (fp16, or MXFP4's E8M0 bytes).
  LLMCTL_AVX512 static __m512 scales(const uint8_t* rec) {
    if constexpr (kRec.e8m0) return e8m0_half_x16(rec + kRec.d);
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + kRec.d)));
  }

  // The prefetch a template argument: a run-time test in the loop cost the 8-token tile 6 to
  // 10 % at 512 tokens with the prefetch off (one core, Q4_0 / Q8_0 / Q4_1 2048x8192).
  template <int T>
  LLMCTL_AVX512 static void tile(const TileArgs& a, int n_rows) {
    if (a.prefetch != 0 && a.panel == nullptr)
      tile<T, true>(a, n_rows);
    else
      tile<T, false>(a, n_rows);
  }
  template <int T, bool kPrefetch>
  LLMCTL_AVX512 static void tile(const TileArgs& a, int n_rows) {
    const int64_t nb = a.n / 32;
    __m512 acc[static_cast<size_t>(T)];
    for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* rec = a.w + static_cast<size_t>(b) * kRec.bytes;
      if constexpr (kPrefetch) prefetch_l2(rec + a.prefetch, kRec.bytes);
      const __m512 dw = scales(rec);
      const int8_t* qx = a.qs + 32 * b;
      // isum starts at -offset * sum(x block) (TileArgs::qoff, a broadcast load), so the
      // dot products land on it exactly as if subtracted after.
      __m512i sum[static_cast<size_t>(T)];
      for (int t = 0; t < T; ++t)
        sum[t] = kOffset != 0 ? _mm512_set1_epi32(a.qoff[t * nb + b]) : _mm512_setzero_si512();
      if (kPacks && a.panel != nullptr) {
        const uint8_t* p = a.panel + static_cast<size_t>(b) * kPanelBlockBytes;
        for (int s = 0; s < 8; ++s) {
          const __m512i v = _mm512_loadu_si512(p + 64 * s);
          for (int t = 0; t < T; ++t) sum[t] = dot4_u8s8_bcast(sum[t], v, qx + t * a.n + 4 * s);
        }
      } else if constexpr (Block::kNibbles) {
        const __m512i qh =
            Block::kHighBit ? _mm512_loadu_si512(rec + kRec.qh) : _mm512_setzero_si512();
        nibble_dots<T, 0>(rec, qh, qx, a.n, sum);
        nibble_dots<T, 1>(rec, qh, qx, a.n, sum);
        nibble_dots<T, 2>(rec, qh, qx, a.n, sum);
        nibble_dots<T, 3>(rec, qh, qx, a.n, sum);
      } else {
        for (int s = 0; s < 8; ++s) {
          const __m512i v = _mm512_loadu_si512(rec + kRec.q + 64 * s);
          for (int t = 0; t < T; ++t) sum[t] = dot4_u8s8_bcast(sum[t], v, qx + t * a.n + 4 * s);
        }
      }
      __m512 mw = _mm512_setzero_ps();
      if constexpr (Block::kHasMin)
        mw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + kRec.m)));
      for (int t = 0; t < T; ++t) {
        const int64_t tb = t * nb + b;
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[t]),
                                 _mm512_mul_ps(dw, _mm512_set1_ps(a.qd[tb])), acc[t]);
        if constexpr (Block::kHasMin)  // float(xsum) * d_x, TileArgs::qsumd
          acc[t] = _mm512_fmadd_ps(_mm512_set1_ps(a.qsumd[tb]), mw, acc[t]);
      }
    }
    const __mmask16 store = static_cast<__mmask16>((1u << n_rows) - 1u);
    for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(a.out + t * a.out_stride, store, acc[t]);
  }
};

LLMCTL_AVX512_END
#endif  // LLMCTL_HAVE_X86

// The MatmulKernel over repacked Block weights (MatmulKernel::repacked): 16-row tiles, 8
// tokens per prefill tile (8 accumulators + 8 isums + the weights fit the 32 zmm registers), no
// packing; none (tile == nullptr) off x86.
template <class Block>
MatmulKernel make_repacked_quant_kernel_avx512(const char* name) {
  MatmulKernel k;
#if defined(LLMCTL_HAVE_X86)
  k.name = name;
  k.quantized = true;
  k.rows_decode = 16;
  k.rows_prefill = 16;
  k.tokens_prefill = 8;
  using Tile = RepackedQuantTile<Block>;
  k.tile = &dispatch_quant_tile<Tile>;
  k.sum_offset = Tile::kOffset;
  k.sum_scaled = Block::kHasMin;
  if constexpr (Tile::kPacks) {
    k.pack = &Tile::pack;
    k.pack_fills_l2 = true;
    k.panel_bytes_per_block = Tile::kPanelBlockBytes;
    k.pack_min_tokens = 3 * k.tokens_prefill;
  }
  k.repacked = true;
#else
  (void)name;
#endif
  return k;
}

}  // namespace llmctl::cpu
