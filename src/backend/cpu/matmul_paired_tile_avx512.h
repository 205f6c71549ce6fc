#pragma once
// Internal to the matmul fast path: AVX-512 VNNI prefill tiles built on the AVX2 kernels' own
// 8-row packing, for the block types without a direct 16-row unpacking (the K-quants and
// IQ4_XS; Q5_0, Q5_1, IQ4_NL, MXFP4), on a CPU with matmul_fast_has_avx512(). Same traits
// and the same arithmetic contract (matmul_quant_tile.h, matmul_kquant_tile.h), so the same
// bits as the scalar and AVX2 kernels.
//
// Layout: 16 rows are the 16 lanes of a zmm. A unit (a 256-element super-block of a K-quant,
// a 32-element block otherwise) of the 16 rows is the two 8-row AVX2 records of that unit
// (rows 0..7 and rows 8..15) interleaved 32 bytes at a time: every 32-byte part of an AVX2
// record holds one 4-byte value per row lane (4 weights of a block, a float scale, an int16
// pair), so part p of the 16-row record is 64 bytes at 64 p, rows 0..7 then 8..15, and every
// offset of the AVX2 record doubles. The int8 products of a block are vpdpbusd steps
// (unsigned weights x signed activations, exact int32 sums: no int16 partial sums to bound),
// 8 per block, against T tokens' 4 activation bytes broadcast; signed weights (IQ4_NL) are
// q + 128, less 128 times the activations' block sum (QuantUnit::compute), MXFP4's levels + 12
// (kLevelBias) less 12 times it.
//
// Decode (one token, no panel) keeps the AVX2 tile: it streams each weight byte once and is
// bound by memory, and its 8-row unpacking is what the 16-row record is built from anyway.
// So these kernels' decode tiles are 8 rows (AVX2) and their prefill tiles 16. (Tried: decode
// through the 16-row record built one unit at a time, Q4_K / Q6_K / Q5_0 at 2048x2048 and
// 8192x2048, 2 threads, 2-core AVX-512 EPYC: 30 to 60 % fewer GB/s than the AVX2 tile.)
// Weights repacked once at load (weight_repack.h) have VNNI decode tiles that read the
// records: matmul_repacked_tile.h (K-quants, 8 rows), matmul_repacked_quant_tile.h (Q5_0,
// Q5_1, 16 rows).
//
// A Unit gives:
//   kRecordBytes, kElements        the AVX2 record of one unit of 8 rows; elements per unit
//   pack8(rows, u, out)            that record of unit u of the 8 rows
//   compute<T>(rec16, a, u, acc)   acc[t] (16 rows) over unit u, from its 16-row record
//   decode<T>(a, n_rows)           the AVX2 tile (8 rows, weights read in place)
// KQuantUnit (any K-quant trait with superblock512) and QuantUnit (any QuantTileAvx2 block).

#include "backend/cpu/matmul_kquant_tile.h"
#include "backend/cpu/matmul_quant_tile_avx512.h"

namespace llmctl::cpu {

#if defined(LLMCTL_HAVE_X86)
LLMCTL_AVX512_BEGIN

// The sums of steps [S0, S1) of a 16-row block w (unsigned weights, 64 bytes a step) against
// T tokens' activations (qx + t * n): sum[t]. The steps are template arguments and the loop
// unrolled: with a runtime range GCC 12 kept it rolled and rotated the T sums through as many
// register moves a step as there were dot products (Q6_K prefill, 8 tokens).
template <int T, int S0, int S1>
LLMCTL_AVX512 inline void dots_u8_512(const uint8_t* w, const int8_t* qx, int64_t n, __m512i* sum) {
  for (int t = 0; t < T; ++t) sum[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
  for (int s = S0; s < S1; ++s) {
    const __m512i ws = _mm512_loadu_si512(w + 64 * s);
    for (int t = 0; t < T; ++t) sum[t] = dot4_u8s8_bcast(sum[t], ws, qx + t * n + 4 * s);
  }
}

template <class Unit>
struct PairedTileAvx512 {
  static constexpr int kRows = 16;
  static constexpr size_t kRecordBytes = 2 * Unit::kRecordBytes;
  static constexpr int64_t kBlocksPerUnit = Unit::kElements / 32;
  static_assert(Unit::kRecordBytes % 32 == 0, "an AVX2 record is a sequence of 32-byte parts");

  LLMCTL_AVX512 static void pack(const TileArgs& a, int n_rows, uint8_t* panel) {
    const uint8_t* rows[16];
    for (int r = 0; r < 16; ++r)
      rows[r] = a.w + static_cast<size_t>(r < n_rows ? r : n_rows - 1) * a.w_stride;
    alignas(64) uint8_t half[2][Unit::kRecordBytes];
    for (int64_t u = 0; u < a.n / Unit::kElements; ++u) {
      Unit::pack8(rows, u, half[0]);
      Unit::pack8(rows + 8, u, half[1]);
      uint8_t* out = panel + static_cast<size_t>(u) * kRecordBytes;
      for (size_t p = 0; p < Unit::kRecordBytes; p += 32) {
        const __m256i lo = _mm256_load_si256(reinterpret_cast<const __m256i*>(half[0] + p));
        const __m256i hi = _mm256_load_si256(reinterpret_cast<const __m256i*>(half[1] + p));
        _mm512_storeu_si512(out + 2 * p, _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1));
      }
    }
  }

  template <int T>
  LLMCTL_AVX512 static void tile(const TileArgs& a, int n_rows) {
    if (a.panel == nullptr) {  // decode: 8-row AVX2 tiles (MatmulKernel::rows_decode)
      Unit::template decode<T>(a, n_rows);
      return;
    }
    __m512 acc[static_cast<size_t>(T)];
    for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t u = 0; u < a.n / Unit::kElements; ++u)
      Unit::template compute<T>(a.panel + static_cast<size_t>(u) * kRecordBytes, a, u, acc);
    const __mmask16 store = static_cast<__mmask16>((1u << n_rows) - 1u);
    for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(a.out + t * a.out_stride, store, acc[t]);
  }
};

// A K-quant trait KQ (matmul_kquant_tile.h) with superblock512<T>(record16, a, sb, acc).
template <class KQ>
struct KQuantUnit {
  static constexpr size_t kRecordBytes = KQ::kPanelBytes;
  static constexpr int64_t kElements = kKQuantSuperBlock;
  LLMCTL_AVX2 static void pack8(const uint8_t* const rows[8], int64_t sb, uint8_t* out) {
    KQ::pack(rows, static_cast<size_t>(sb) * KQ::kBytes, out);
  }
  template <int T>
  LLMCTL_AVX512 static void compute(const uint8_t* p, const TileArgs& a, int64_t sb, __m512* acc) {
    KQ::template superblock512<T>(p, a, sb, acc);
  }
  template <int T>
  LLMCTL_AVX2 static void decode(const TileArgs& a, int n_rows) {
    KQuantTileAvx2<KQ>::template tile<T>(a, n_rows);
  }
};

// A block trait of matmul_quant_tile.h, from QuantTileAvx2's record: w[8] (unsigned q, or |q|),
// sgn[8] (signed blocks: q), dw, mw (Q4_1, Q5_1).
template <class Block>
struct QuantUnit {
  using Avx2 = QuantTileAvx2<Block>;
  static constexpr size_t kRecordBytes = Avx2::kPanelBlockBytes;
  static constexpr int64_t kElements = 32;
  LLMCTL_AVX2 static void pack8(const uint8_t* const rows[8], int64_t b, uint8_t* out) {
    Avx2::pack_block(rows, b, out);
  }
  template <int T>
  LLMCTL_AVX512 static void compute(const uint8_t* p, const TileArgs& a, int64_t b, __m512* acc) {
    const int64_t nb = a.n / 32;
    __m512i sum[static_cast<size_t>(T)];
    for (int t = 0; t < T; ++t) sum[t] = _mm512_setzero_si512();
    // Signed weights (IQ4_NL) go in as the unsigned q + 128 (q xor 0x80, from the record's
    // sgn vectors: one op a step for the T tokens, where giving each token's activations q's
    // sign took one a token), and 128 times the block's activation sum comes off the exact
    // sum below. 8192x2048 at 512 tokens, one core of the AVX-512 EPYC: IQ4_NL 187 -> 207 to
    // 243 GFLOP/s, MXFP4 147 -> 250 (MXFP4's record now holds its levels + 12, unsigned).
    for (int s = 0; s < 8; ++s) {
      const __m512i w =
          Avx2::kSigned ? _mm512_xor_si512(_mm512_loadu_si512(p + 2 * Avx2::kSgnOffset + 64 * s),
                                           _mm512_set1_epi8(static_cast<char>(0x80)))
                        : _mm512_loadu_si512(p + 64 * s);
      for (int t = 0; t < T; ++t)
        sum[t] = dot4_u8s8_bcast(sum[t], w, a.qs + t * a.n + 32 * b + 4 * s);
    }
    const __m512 dw = _mm512_loadu_ps(p + 2 * Avx2::kDwOffset);
    const __m512 mw = Block::kHasMin ? _mm512_loadu_ps(p + 2 * Avx2::kMwOffset) : _mm512_setzero_ps();
    for (int t = 0; t < T; ++t) {  // QuantTileAvx2::finish, 16 lanes
      const int64_t tb = t * nb + b;
      __m512i s32 = sum[t];
      if constexpr (quant_avx2_offset<Block>() != 0)  // Q4_0, Q5_0; MXFP4's level bias
        s32 = _mm512_sub_epi32(s32, _mm512_set1_epi32(quant_avx2_offset<Block>() * a.qsum[tb]));
      if constexpr (Avx2::kSigned) s32 = _mm512_sub_epi32(s32, _mm512_set1_epi32(128 * a.qsum[tb]));
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s32), _mm512_mul_ps(dw, _mm512_set1_ps(a.qd[tb])),
                               acc[t]);
      if constexpr (Block::kHasMin)
        acc[t] = _mm512_fmadd_ps(_mm512_set1_ps(static_cast<float>(a.qsum[tb]) * a.qd[tb]), mw,
                                 acc[t]);
    }
  }
  template <int T>
  LLMCTL_AVX2 static void decode(const TileArgs& a, int n_rows) {
    Avx2::template tile<T>(a, n_rows);
  }
};

LLMCTL_AVX512_END
#endif  // LLMCTL_HAVE_X86

// The AVX-512 MatmulKernel over a Unit: 16-row VNNI prefill tiles, the AVX2 decode tile; none
// (tile == nullptr) off x86.
#if defined(LLMCTL_HAVE_X86)
// The MatmulKernel of a PairedTileAvx512 whose prefill panels `pack` writes.
template <class Tile>
MatmulKernel paired_tile_kernel(const char* name, PackFn pack) {
  MatmulKernel k;
  k.name = name;
  k.quantized = true;
  k.rows_decode = kQuantTileRows;
  k.rows_prefill = Tile::kRows;
  k.tokens_prefill = 8;  // 8 accumulators + 8 integer sums + weights fit the 32 zmm registers
  k.tile = &dispatch_quant_tile<Tile>;
  k.pack = pack;
  k.pack_fills_l2 = true;
  k.panel_bytes_per_block = Tile::kRecordBytes / static_cast<size_t>(Tile::kBlocksPerUnit);
  return k;
}
#endif

template <template <class> class UnitOf, class Trait>
MatmulKernel make_paired_kernel_avx512(const char* name) {
#if defined(LLMCTL_HAVE_X86)
  using Tile = PairedTileAvx512<UnitOf<Trait>>;
  MatmulKernel k = paired_tile_kernel<Tile>(name, &Tile::pack);
  set_kquant_activations<Trait>(k);
  return k;
#else
  (void)name;
  return MatmulKernel{};
#endif
}

}  // namespace llmctl::cpu
