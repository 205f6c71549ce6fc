#pragma once
// Internal to the matmul fast path: the AVX-512 VNNI version of the quantized tile
// (matmul_quant_tile.h), for a CPU with matmul_fast_has_avx512(). Same block traits, same
// arithmetic contract, so the same bits as QuantTileScalar (and QuantTileAvx2):
//   isum = sum_j q_w[j] * q_x[j] exact in int32;  acc = fma(float(isum), d_w * d_x, acc)
//   (Q4_1: acc = fma(float(xsum) * d_x, m, acc)).
//
// Layout: the AVX2 tile's, twice as wide. 16 rows are the 16 int32 lanes of a zmm; for each
// block the 16 rows' weight bytes are transposed so that one 64-byte vector holds 4
// consecutive weights of each row, and one vpdpbusd against the token's 4 activation bytes
// (broadcast to every row) adds the 4 products of each row to its int32 lane: 8 such steps
// give the block's isum for 16 rows. vpdpbusd (not the saturating vpdpbusds) multiplies
// unsigned by signed bytes and sums in int32, exactly (|4 products| <= 4 * 255 * 128).
// Nibble weights (0..15) are the unsigned operand as they are; Q8_0's signed weights give
// |q| (0..128, exact as u8 also for q = -128) and the activation negated where q < 0.
// The step is dot4_u8s8_bcast / dot4_s8s8 below: other block types' AVX-512 tiles use them
// too.
//
// 512-bit 16-row tiles rather than the AVX2 8-row tile with a 256-bit vpdpbusd step (tried):
// 2 threads, 256 tokens, GFLOP/s AVX2 / 256-bit VNNI / this, 2048x2048: Q4_0 199 / 232 / 512,
// Q8_0 150 / 212 / 330, Q4_1 223 / 259 / 366; 2048x8192: Q4_0 226 / 246 / 400, Q8_0 141 /
// 211 / 300, Q4_1 179 / 240 / 275. Decode reads memory at the same ~18-20 GB/s with all three.

#include "backend/cpu/matmul_quant_tile.h"

namespace llmctl::cpu {

#if defined(LLMCTL_HAVE_X86)
LLMCTL_AVX512_BEGIN

// sum (16 int32 lanes) += sum_{j<4} w[4l + j] * x[j] per lane l: w unsigned, x the 4 signed
// bytes at x broadcast to every lane, the broadcast folded into vpdpbusd's memory operand
// ({1to16}): one fused micro-op where GCC 12 emits a vpbroadcastd and a vpdpbusd for the
// intrinsics (it never folds this one), so that the prefill tiles, one broadcast per vpdpbusd,
// rename a third fewer micro-ops. AVX-512 Xeon, 512 tokens,
// tools/bench_matmul 2048x8192 and 8192x2048: one core, Q4_0 1.21x / 1.28x, Q4_K 1.20x / 1.16x,
// Q6_K 1.15x / 1.08x; two threads (2048x8192) IQ4_XS 1.23x, Q4_K 1.13x, Q4_0 1.12x, Q5_0 0.99x
// (medians of 3 to 5 alternated runs' best); the Q8_0 records, the two forms alternated within
// one process, 1.05x to 1.11x. End to end, pp512: 1B Q4_K_M 1.11x, Q4_0 1.09x.
LLMCTL_AVX512 inline __m512i dot4_u8s8_bcast(__m512i sum, __m512i w_u8, const int8_t* x) {
#if defined(__GNUC__)
  struct Bytes4 {
    int8_t b[4];
  };
  __asm__("vpdpbusd %2%{1to16%}, %1, %0"
          : "+v"(sum)
          : "v"(w_u8), "m"(*reinterpret_cast<const Bytes4*>(x)));
  return sum;
#else
  int32_t v;
  std::memcpy(&v, x, 4);
  return _mm512_dpbusd_epi32(sum, w_u8, _mm512_set1_epi32(v));
#endif
}

// The same for signed weights given as |w| and the mask of the bytes where w < 0: the
// activation byte is negated there (|x| <= 127, so no overflow), i.e. sign(x, w) as AVX2's
// vpsignb; where w == 0 the product is 0 whatever x is.
LLMCTL_AVX512 inline __m512i dot4_s8s8(__m512i sum, __m512i w_abs, __mmask64 w_neg, __m512i x) {
  return _mm512_dpbusd_epi32(sum, w_abs, _mm512_mask_sub_epi8(x, w_neg, _mm512_setzero_si512(), x));
}

// 4x4 transpose of 32-bit elements within each 128-bit lane (transpose_dwords_4x4, 512-bit).
LLMCTL_AVX512 inline void transpose_dwords_4x4_512(const __m512i v[4], __m512i g[4]) {
  const __m512i t0 = _mm512_unpacklo_epi32(v[0], v[1]);
  const __m512i t1 = _mm512_unpackhi_epi32(v[0], v[1]);
  const __m512i t2 = _mm512_unpacklo_epi32(v[2], v[3]);
  const __m512i t3 = _mm512_unpackhi_epi32(v[2], v[3]);
  g[0] = _mm512_unpacklo_epi64(t0, t2);
  g[1] = _mm512_unpackhi_epi64(t0, t2);
  g[2] = _mm512_unpacklo_epi64(t1, t3);
  g[3] = _mm512_unpackhi_epi64(t1, t3);
}

template <class Block>
struct QuantTileAvx512 {
  static constexpr int kRows = 16;
  // One block of the 16 rows, transposed (the panel layout; a prefill panel is nb of these):
  //   w[8]    64 bytes each: weights 4s..4s+3 of rows 0..15 (4 bytes per row, row order);
  //           nibble blocks: q in 0..15; Q8_0: |q|
  //   neg[8]  Q8_0 only: 8 bytes each, bit i set where byte i of w[s] has q < 0
  //   dw      16 floats: the rows' scales;  mw  Q4_1 only: 16 floats, the rows' mins
  static constexpr size_t kNegOffset = 512;
  static constexpr size_t kDwOffset = Block::kNibbles ? 512 : 512 + 64;
  static constexpr size_t kMwOffset = kDwOffset + 64;
  static constexpr size_t kPanelBlockBytes = kMwOffset + (Block::kHasMin ? 64 : 0);

  struct Unpacked {
    __m512i w[8];
    __mmask64 neg[8];
    __m512 dw, mw;
  };

  LLMCTL_AVX512 static __m512i load16(const uint8_t* p) {
    return _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  // 16 bytes at `off` of rows i, i + 4, i + 8, i + 12 in the four 128-bit lanes.
  LLMCTL_AVX512 static __m512i load_four_rows(const uint8_t* const rows[16], int i, size_t off) {
    __m512i v = load16(rows[i] + off);
    v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[i + 4] + off)),
                           1);
    v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[i + 8] + off)),
                           2);
    return _mm512_inserti32x4(
        v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[i + 12] + off)), 3);
  }

  // The block's d (and Q4_1's m: the next 2 bytes) of the 16 rows: one 4-byte gather at the
  // block's start (every block is longer than 4 bytes), rows at byte offsets row_off.
  LLMCTL_AVX512 static void scales(const uint8_t* w, __m512i row_off, size_t blk, __m512& dw,
                                   __m512& mw) {
    const __m512i dm = _mm512_i32gather_epi32(row_off, w + blk, 1);
    dw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dm));  // the low half of each dword: d
    mw = Block::kHasMin ? _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dm, 16)))
                        : _mm512_setzero_ps();
  }

  LLMCTL_AVX512 static void unpack_block(const uint8_t* const rows[16], const uint8_t* w,
                                         __m512i row_off, size_t blk, Unpacked& u) {
    const size_t off = blk + Block::kQsOffset;
    __m512i v[4], g[4];
    if constexpr (Block::kNibbles) {
      for (int i = 0; i < 4; ++i) v[i] = load_four_rows(rows, i, off);
      transpose_dwords_4x4_512(v, g);
      const __m512i low = _mm512_set1_epi8(0x0f);
      for (int k = 0; k < 4; ++k) {
        u.w[k] = _mm512_and_si512(g[k], low);                            // elements 4k..4k+3
        u.w[k + 4] = _mm512_and_si512(_mm512_srli_epi16(g[k], 4), low);  // 16 + 4k ..
        u.neg[k] = u.neg[k + 4] = 0;  // unused by nibble blocks
      }
    } else {
      for (int half = 0; half < 2; ++half) {
        for (int i = 0; i < 4; ++i) v[i] = load_four_rows(rows, i, off + 16 * static_cast<size_t>(half));
        transpose_dwords_4x4_512(v, g);
        for (int k = 0; k < 4; ++k) {
          u.w[4 * half + k] = _mm512_abs_epi8(g[k]);  // -128 -> 0x80 = 128 as unsigned
          u.neg[4 * half + k] = _mm512_movepi8_mask(g[k]);
        }
      }
    }
    scales(w, row_off, blk, u.dw, u.mw);
  }

  // Row pointers and their byte offsets from a.w; rows past n_rows repeat the last one.
  LLMCTL_AVX512 static __m512i tile_rows(const TileArgs& a, int n_rows, const uint8_t* rows[16]) {
    alignas(64) int32_t off[16];
    for (int r = 0; r < 16; ++r) {
      const size_t o = static_cast<size_t>(r < n_rows ? r : n_rows - 1) * a.w_stride;
      off[r] = static_cast<int32_t>(o);  // < 16 rows: far below 2^31
      rows[r] = a.w + o;
    }
    return _mm512_load_si512(off);
  }

  LLMCTL_AVX512 static void pack(const TileArgs& a, int n_rows, uint8_t* panel) {
    const uint8_t* rows[16];
    const __m512i row_off = tile_rows(a, n_rows, rows);
    for (int64_t b = 0; b < a.n / 32; ++b) {
      uint8_t* out = panel + static_cast<size_t>(b) * kPanelBlockBytes;
      Unpacked u;
      unpack_block(rows, a.w, row_off, static_cast<size_t>(b) * Block::kBytes, u);
      for (size_t s = 0; s < 8; ++s) {
        _mm512_storeu_si512(out + 64 * s, u.w[s]);
        if constexpr (!Block::kNibbles) {
          const uint64_t m = _cvtmask64_u64(u.neg[s]);
          std::memcpy(out + kNegOffset + 8 * s, &m, 8);
        }
      }
      _mm512_storeu_ps(out + kDwOffset, u.dw);
      if constexpr (Block::kHasMin) _mm512_storeu_ps(out + kMwOffset, u.mw);
    }
  }

  LLMCTL_AVX512 static __m512i step(__m512i sum, __m512i w, __mmask64 neg, const int8_t* qx,
                                    int s) {
    if constexpr (Block::kNibbles) {
      (void)neg;
      return dot4_u8s8_bcast(sum, w, qx + 4 * s);
    } else {
      const __m512i x = _mm512_set1_epi32(QuantTileAvx2<Block>::load_i32(qx + 4 * s));
      return dot4_s8s8(sum, w, neg, x);
    }
  }

  // The block's contribution to one token's accumulator (16 rows), from its isum lanes.
  LLMCTL_AVX512 static __m512 finish(__m512i sum, __m512 dw, __m512 mw, const TileArgs& a,
                                     int64_t tb, __m512 acc) {
    if constexpr (Block::kOffset8) sum = _mm512_sub_epi32(sum, _mm512_set1_epi32(8 * a.qsum[tb]));
    acc =
        _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(dw, _mm512_set1_ps(a.qd[tb])), acc);
    if constexpr (Block::kHasMin)
      acc = _mm512_fmadd_ps(_mm512_set1_ps(static_cast<float>(a.qsum[tb]) * a.qd[tb]), mw, acc);
    return acc;
  }

  // acc[t] (16 rows) over block b of T tokens, from the packed block pb.
  template <int T>
  LLMCTL_AVX512 static void block(const uint8_t* pb, const TileArgs& a, int64_t b, __m512* acc) {
    const int64_t nb = a.n / 32;
    __m512i sums[static_cast<size_t>(T)];
    for (int t = 0; t < T; ++t) sums[t] = _mm512_setzero_si512();
    for (int s = 0; s < 8; ++s) {
      const __m512i w = _mm512_loadu_si512(pb + 64 * s);
      __mmask64 neg = 0;
      if constexpr (!Block::kNibbles) {
        uint64_t m;
        std::memcpy(&m, pb + kNegOffset + 8 * s, 8);
        neg = _cvtu64_mask64(m);
      }
      for (int t = 0; t < T; ++t) sums[t] = step(sums[t], w, neg, a.qs + t * a.n + 32 * b, s);
    }
    const __m512 dw = _mm512_loadu_ps(pb + kDwOffset);
    const __m512 mw = Block::kHasMin ? _mm512_loadu_ps(pb + kMwOffset) : _mm512_setzero_ps();
    for (int t = 0; t < T; ++t) acc[t] = finish(sums[t], dw, mw, a, t * nb + b, acc[t]);
  }

  template <int T>
  LLMCTL_AVX512 static void tile(const TileArgs& a, int n_rows) {
    const int64_t nb = a.n / 32;
    __m512 acc[static_cast<size_t>(T)];
    for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
    if (a.panel != nullptr) {
      for (int64_t b = 0; b < nb; ++b)
        block<T>(a.panel + static_cast<size_t>(b) * kPanelBlockBytes, a, b, acc);
    } else {
      const uint8_t* rows[16];
      const __m512i row_off = tile_rows(a, n_rows, rows);
      const char* next_tile = reinterpret_cast<const char*>(a.w + 16 * a.w_stride);
      for (int64_t b = 0; b < nb; ++b) {
        const size_t blk = static_cast<size_t>(b) * Block::kBytes;
        if constexpr (T == 1) {
          // as QuantTileAvx2: the next tile's rows, at the pace this one is read (into L2, as
          // the float tiles)
          for (size_t off = 0; off < 16 * Block::kBytes; off += 64)
            _mm_prefetch(next_tile + 16 * blk + off, _MM_HINT_T1);
        }
        Unpacked u;
        unpack_block(rows, a.w, row_off, blk, u);
        for (int t = 0; t < T; ++t) {
          const int8_t* qx = a.qs + t * a.n + 32 * b;
          __m512i sum = _mm512_setzero_si512();
          for (int st = 0; st < 8; ++st) sum = step(sum, u.w[st], u.neg[st], qx, st);
          acc[t] = finish(sum, u.dw, u.mw, a, t * nb + b, acc[t]);
        }
      }
    }
    const __mmask16 store = static_cast<__mmask16>((1u << n_rows) - 1u);
    for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(a.out + t * a.out_stride, store, acc[t]);
  }
};


LLMCTL_AVX512_END
#endif  // LLMCTL_HAVE_X86

// The AVX-512 MatmulKernel of a block type (16-row tiles); none (tile == nullptr) off x86.
template <class Block>
MatmulKernel make_quant_kernel_avx512(const char* name) {
  MatmulKernel k;
#if defined(LLMCTL_HAVE_X86)
  k.name = name;
  k.quantized = true;
  k.rows_decode = QuantTileAvx512<Block>::kRows;
  k.rows_prefill = QuantTileAvx512<Block>::kRows;
  k.tokens_prefill = 8;  // 8 accumulators + 8 isums + weights fit the 32 zmm registers
  k.tile = &dispatch_quant_tile<QuantTileAvx512<Block>>;
  k.pack = &QuantTileAvx512<Block>::pack;
  k.panel_bytes_per_block = QuantTileAvx512<Block>::kPanelBlockBytes;
#else
  (void)name;
#endif
  return k;
}

}  // namespace llmctl::cpu
