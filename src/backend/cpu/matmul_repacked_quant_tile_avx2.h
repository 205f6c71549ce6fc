#pragma once
// Internal to the matmul fast path: the AVX2 tiles over the repacked 32-element block types
// Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL and MXFP4 (weight_repack.h: 16-row groups, one record
// of the 16 rows' scales and pre-transposed quants per 32-element block), for a CPU with
// matmul_fast_has_avx2() (and the AVX-512 machines told LLMCTL_MATMUL_ISA=avx2). The in-place
// AVX2 tile's arithmetic (QuantTileAvx2 of matmul_quant_tile.h: its step and finish, maddubs
// with the sign trick for Q8_0, int16 sums for Q4's nibbles, the min term of Q4_1 and Q5_1), so
// the same bits as the scalar kernel; only the weights' source differs.
//
// A record's 64-byte vector is 4 bytes of each of the 16 rows: its first 32 bytes are rows
// 0..7, exactly the register the in-place tile builds with a 4x4 dword transpose of 8 rows,
// and its last 32 bytes rows 8..15. So a record is two of the in-place tile's blocks
// (QuantTileAvx2::Unpacked), read with plain loads (nibbles: a mask or a shift and a mask; Q5:
// the step's fifth bits shifted from the qh vector's half to bit 4, a mask and an or, where the
// in-place tile spreads and compares bytes; Q8_0, stored q + 128: the sign bit flipped back),
// and the 16-row group is one sequential stream.
//
//   decode (one token)  16 rows (two 8-lane halves): each record read once, in order.
//   prefill (T tokens)  16 rows, one 8-row half after the other (T accumulators in registers),
//                       each step's operands taken from the record (L2-resident while the
//                       token chunk passes): no packing step. Unpacking into the in-place
//                       kernel's panels instead was 0.8x the in-place kernel at 2 tokens, this
//                       is 1.5x (Q4_0) and 2x (Q8_0); at 512 tokens Q4_0 is 0.95x, Q8_0 1.0x
//                       (2048x2048, one thread; BENCHMARKS.md 2026-12-03 evening). Q5 (its
//                       operands cost more): in-place panels unpacked from the record once per
//                       chunk of 3 token tiles or more (pack below).
//
// Addressing as matmul_repacked_quant_tile.h: TileArgs::w_stride is a sixteenth of a group's
// bytes and a tile (r a multiple of 16) starts at its group's first record.

#include <algorithm>

#include "backend/cpu/matmul_repacked_quant_tile.h"

namespace llmctl::cpu {

#if defined(LLMCTL_HAVE_X86)
// fifth_bits_512's shifts on 8 rows (the 32-byte half of a qh vector).
LLMCTL_AVX2 inline __m256i fifth_bits_256(__m256i qh, int s) {
  return s < 4 ? _mm256_slli_epi16(qh, 4 - s) : _mm256_srli_epi16(qh, s - 4);
}

template <class Block>
struct RepackedQuantTileAvx2 {
  using Q = QuantTileAvx2<Block>;
  static constexpr Q16Record kRec = repacked_record<Block>();

  // Step s's operands for rows 8h .. 8h + 7 of record rec (QuantTileAvx2::Unpacked's w[s],
  // sgn[s]: 4 weights of each of the 8 rows, weights 4s .. 4s + 3; nibbles: 16 + 4(s - 4) ..
  // for s >= 4, the high nibbles).
  LLMCTL_AVX2 static void operands(const uint8_t* rec, int h, int s, __m256i& w, __m256i& sgn) {
    if constexpr (Block::kNibbles) {
      const __m256i v = Q::load(rec + kRec.q + 32 * h + 64 * (s % 4));
      w = _mm256_and_si256(s < 4 ? v : _mm256_srli_epi16(v, 4), _mm256_set1_epi8(0x0f));
      if constexpr (Block::kHighBit) {
        const __m256i qh = Q::load(rec + kRec.qh + 32 * h);
        w = _mm256_or_si256(w, _mm256_and_si256(fifth_bits_256(qh, s), _mm256_set1_epi8(0x10)));
      }
      if constexpr (Block::kLookup) {  // the level as the in-place tile takes it
        sgn = _mm256_shuffle_epi8(lookup_table_256<Block>(), w);
        w = Q::kSigned ? _mm256_sign_epi8(sgn, sgn) : sgn;
      } else {
        sgn = w;  // unused by unsigned blocks
      }
    } else {
      sgn = _mm256_xor_si256(Q::load(rec + kRec.q + 32 * h + 64 * s),
                             _mm256_set1_epi8(static_cast<char>(0x80)));
      w = _mm256_sign_epi8(sgn, sgn);  // q + 128 back to q, then |q|
    }
  }
  LLMCTL_AVX2 static __m256 fp16x8(const uint8_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  // MXFP4: e8m0_half_x16's bits (matmul_repacked_quant_tile.h) for the 8 E8M0 bytes at e8.
  LLMCTL_AVX2 static __m256 e8m0_half_x8(const uint8_t* e8) {
    const __m256i e = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(e8)));
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
    const __m256i denormal = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
    return _mm256_castsi256_ps(
        _mm256_blendv_epi8(normal, denormal, _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e)));
  }
  // The 8 rows' d (dw) and m (mw; zero without a min) of half h.
  LLMCTL_AVX2 static void scales(const uint8_t* rec, int h, __m256& dw, __m256& mw) {
    if constexpr (kRec.e8m0)
      dw = e8m0_half_x8(rec + kRec.d + 8 * h);
    else
      dw = fp16x8(rec + kRec.d + 16 * h);
    mw = Block::kHasMin ? fp16x8(rec + kRec.m + 16 * h) : _mm256_setzero_ps();
  }

  // The operands of rows 8h .. 8h + 7 of record rec (the in-place tile's block in registers).
  LLMCTL_AVX2 static void unpack(const uint8_t* rec, int h, typename Q::Unpacked& u) {
    for (int s = 0; s < 8; ++s) operands(rec, h, s, u.w[s], u.sgn[s]);
    scales(rec, h, u.dw, u.mw);
  }

  // Q5 prefill packs (MatmulKernel::pack) a chunk of 3 token tiles or more: its operands cost
  // 5 instructions a step against a panel's one load, so they are unpacked once per token
  // chunk into the in-place tile's panels (half h's blocks from h * nb) instead of once per
  // token tile: 1.08x to 1.35x at 32 and 512 tokens (2 threads, 576x576 .. 2048x2048); at 2
  // tokens packing was 0.57x to 0.84x, hence the minimum. IQ4_NL likewise (a lookup and a sign
  // a step besides the nibble's mask). The other types' operands are one or two instructions:
  // they read the record.
  static constexpr bool kPacks = Block::kHighBit || Block::kLookup;
  LLMCTL_AVX2 static void pack(const TileArgs& a, int n_rows, uint8_t* panel) {
    const int64_t nb = a.n / 32;
    for (int h = 0; h < (n_rows > 8 ? 2 : 1); ++h)
      for (int64_t b = 0; b < nb; ++b) {
        typename Q::Unpacked u;
        unpack(a.w + static_cast<size_t>(b) * kRec.bytes, h, u);
        Q::store_block(u, panel + static_cast<size_t>(h * nb + b) * Q::kPanelBlockBytes);
      }
  }

  // Decode: the group's stream in order, each record's two halves in turn.
  LLMCTL_AVX2 static void decode(const TileArgs& a, int halves, __m256* acc) {
    for (int64_t b = 0; b < a.n / 32; ++b) {
      const uint8_t* rec = a.w + static_cast<size_t>(b) * kRec.bytes;
      if (a.prefetch != 0) prefetch_l2(rec + a.prefetch, kRec.bytes);
      for (int h = 0; h < halves; ++h) {
        typename Q::Unpacked u;
        unpack(rec, h, u);
        Q::template block_unpacked<1>(u, a, b, acc + h);
      }
    }
  }

  // Prefill: half h of the group (L2-resident while the token chunk passes) for T tokens, as
  // the in-place block<T> over its panel, each step's operands from the record instead. The
  // first half's pass prefetches (matmul_repacked_quant_tile.h), the second finds the records.
  // The prefetch a template argument, as the AVX-512 tile's.
  template <int T, bool kPrefetch>
  LLMCTL_AVX2 static void prefill(const TileArgs& a, int h, __m256* acc) {
    const int64_t nb = a.n / 32;
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* rec = a.w + static_cast<size_t>(b) * kRec.bytes;
      if constexpr (kPrefetch) prefetch_l2(rec + a.prefetch, kRec.bytes);
      __m256i sums[static_cast<size_t>(T)];
      for (int t = 0; t < T; ++t) sums[t] = _mm256_setzero_si256();  // step 0 overwrites them
      for (int s = 0; s < 8; ++s) {
        __m256i w, sgn;
        operands(rec, h, s, w, sgn);
        for (int t = 0; t < T; ++t) sums[t] = Q::step(sums[t], w, sgn, a.qs + t * a.n + 32 * b, s);
      }
      __m256 dw, mw;
      scales(rec, h, dw, mw);
      for (int t = 0; t < T; ++t) acc[t] = Q::finish(sums[t], dw, mw, a, t * nb + b, acc[t]);
    }
  }

  template <int T>
  LLMCTL_AVX2 static void tile(const TileArgs& a, int n_rows) {
    const int halves = n_rows > 8 ? 2 : 1;
    __m256 acc[2][static_cast<size_t>(T)];
    for (int h = 0; h < 2; ++h)
      for (int t = 0; t < T; ++t) acc[h][t] = _mm256_setzero_ps();
    if constexpr (T == 1) {
      decode(a, halves, &acc[0][0]);  // acc[h][0] at h
    } else if (a.panel != nullptr) {
      const int64_t nb = a.n / 32;
      for (int h = 0; h < halves; ++h)
        for (int64_t b = 0; b < nb; ++b)
          Q::template block<T>(a.panel + static_cast<size_t>(h * nb + b) * Q::kPanelBlockBytes, a,
                               b, acc[h]);
    } else {
      for (int h = 0; h < halves; ++h) {
        if (h == 0 && a.prefetch != 0)
          prefill<T, true>(a, h, acc[h]);
        else
          prefill<T, false>(a, h, acc[h]);
      }
    }
    for (int h = 0; h < halves; ++h) {
      TileArgs o = a;
      o.out = a.out + 8 * h;
      for (int t = 0; t < T; ++t) store_lane_tile(o, std::min(8, n_rows - 8 * h), t, acc[h][t]);
    }
  }
};
#endif  // LLMCTL_HAVE_X86

// The AVX2 MatmulKernel over repacked Block weights (MatmulKernel::repacked): 16-row tiles,
// the in-place kernel's tokens per prefill tile; none (tile == nullptr) off x86.
template <class Block>
MatmulKernel make_repacked_quant_kernel_avx2(const char* name) {
  MatmulKernel k;  // off x86: none
#if defined(LLMCTL_HAVE_X86)
  using Tile = RepackedQuantTileAvx2<Block>;
  k.name = name;
  k.quantized = true;
  k.rows_decode = 16;
  k.rows_prefill = 16;
  k.tokens_prefill = quant_tile_tokens<Block>();
  k.tile = &dispatch_quant_tile<Tile>;
  if constexpr (Tile::kPacks) {
    k.pack = &Tile::pack;
    k.panel_bytes_per_block = 2 * QuantTileAvx2<Block>::kPanelBlockBytes;
    k.pack_min_tokens = 3 * k.tokens_prefill;
  }
  k.repacked = true;
#endif
  (void)name;
  return k;
}

}  // namespace llmctl::cpu
