#pragma once
// Internal to the matmul fast path: the AVX2 tiles over repacked K-quant weights
// (weight_repack.h: 8-row groups of pre-transposed super-block records), for a CPU with
// matmul_fast_has_avx2() (and the AVX-512 machines told LLMCTL_MATMUL_ISA=avx2). Same
// arithmetic contract as the in-place kernels (matmul_kquant_tile.h), so the same bits as the
// scalar kernel.
//
//   decode, and batches of fewer than 32 tokens (MatmulKernel::pack_min_tokens)
//                       8 rows: each record is read with plain 32-byte loads, nibbles and high
//                       bits split with shifts and masks (once for up to 4 tokens), maddubs
//                       steps added in int16 as the in-place trait does (KQ::kGroup), widened
//                       by a madd; no gathering or transposing of rows (RK::decode_avx2<T>).
//                       This is what the in-place AVX2 tile spends most of its time on
//                       (kq_transpose32 of 8 rows per vector).
//   prefill             8 rows: each record unpacked once per token chunk into the in-place
//                       kernel's panel record (RK::unpack: the same bytes KQ::pack writes from
//                       the GGUF rows), then KQ's own superblock<T>.
//
// Addressing as matmul_repacked_tile.h: TileArgs::w_stride is an eighth of a group's bytes and
// a tile (8 rows, r a multiple of 8) starts at its group's first record.
//
// A repacked trait RK gives, besides matmul_repacked_tile.h's KQ, kRecordBytes and unpack:
//   decode_avx2<T>(rec, a, sb, acc)   acc[0..T) (8 rows, tokens 0..T-1) over super-block sb,
//                                     from its record

#include <algorithm>

#include "backend/cpu/matmul_kquant_tile.h"

namespace llmctl::cpu {

#if defined(LLMCTL_HAVE_X86)
// The 8 bytes at p, zero-extended (signed: sign-extended) to 8 int32 lanes: the per-row bytes
// of a record (scales, mins).
LLMCTL_AVX2 inline __m256i rp_u8_lanes(const uint8_t* p) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}
LLMCTL_AVX2 inline __m256i rp_i8_lanes(const uint8_t* p) {
  return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}
// The 8 fp16 at p as floats.
LLMCTL_AVX2 inline __m256 rp_fp16_lanes(const uint8_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
// One maddubs step: 4 unsigned weight bytes x 4 activation bytes, per row lane (int16 pairs).
LLMCTL_AVX2 inline __m256i rp_maddubs4(__m256i w_u8, const int8_t* x) {
  return _mm256_maddubs_epi16(w_u8, kq_bcast4(x));
}

// One token's int16 sums over half h of a super-block (its blocks 4 h .. 4 h + 3), for the
// types whose 4 blocks of a half share their quant vectors (Q2_K, Q3_K): R::weights(rec, h, s,
// w) gives step s of the 4 blocks from one load, and part[k][i] is the sum of block 4 h + k's
// half i (steps 4 i .. 4 i + 3) against the half's activations qx, 8 sums in flight. Their
// unsigned weights keep 4 maddubs steps within int16 (KQ16Panel::kGroup).
template <class R>
LLMCTL_AVX2 inline void rp_half_maddubs(const uint8_t* rec, int h, const int8_t* qx,
                                        __m256i part[4][2]) {
  static_assert(R::KQ::kGroup == 4, "4 maddubs steps of a half block fit int16");
#pragma GCC unroll 8
  for (int s = 0; s < 8; ++s) {
    __m256i w[4];
    R::weights(rec, h, s, w);
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const __m256i m = rp_maddubs4(w[k], qx + 32 * k + 4 * s);
      part[k][s / 4] = s % 4 == 0 ? m : _mm256_add_epi16(part[k][s / 4], m);
    }
  }
}

template <class RK>
struct RepackedTileAvx2 {
  using KQ = typename RK::KQ;
  static constexpr size_t kPanelBlockBytes = KQ::kPanelBytes / 8;  // per 32-element block

  // Prefill: the group's records as KQ's 8-row panel records, one per super-block.
  LLMCTL_AVX2 static void pack(const TileArgs& a, int n_rows, uint8_t* panel) {
    (void)n_rows;  // the group's rows past the matrix's end repeat its last row
    for (int64_t s = 0; s < a.n / kKQuantSuperBlock; ++s)
      RK::unpack(a.w + static_cast<size_t>(s) * RK::kRecordBytes,
                 panel + static_cast<size_t>(s) * KQ::kPanelBytes);
  }

  // Prefill tiles over the panel; decode, and the prefill of fewer tokens than
  // MatmulKernel::pack_min_tokens, from the records: each record's weights unpacked in
  // registers once for up to kSmallTokens tokens (RK::decode_avx2<T>). 4 spill some of the 16
  // ymm registers, and still beat 2 and 3 (one thread, 2048x8192, 3 rounds: at 4 tokens Q4_K
  // 1.20x, Q6_K 1.24x over 2; at 12 tokens 1.26x and 1.13x).
  static constexpr int kSmallTokens = 4;
  template <int T>
  LLMCTL_AVX2 static void tile(const TileArgs& a, int n_rows) {
    if (a.panel != nullptr) {
      __m256 acc[static_cast<size_t>(T)];
      for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
      for (int64_t s = 0; s < a.n / kKQuantSuperBlock; ++s)
        KQ::template superblock<T>(a.panel + static_cast<size_t>(s) * KQ::kPanelBytes, a, s, acc);
      for (int t = 0; t < T; ++t) store_lane_tile(a, n_rows, t, acc[t]);
      return;
    }
    for (int t0 = 0; t0 < T; t0 += kSmallTokens)
      from_records<std::min(T, kSmallTokens)>(tile_args_from_token(a, t0), n_rows,
                                              std::min(kSmallTokens, T - t0));
  }

  // n_tokens (1..T) tokens from the records.
  template <int T>
  LLMCTL_AVX2 static void from_records(const TileArgs& a, int n_rows, int n_tokens) {
    if constexpr (T > 1)
      if (n_tokens < T) {
        from_records<T - 1>(a, n_rows, n_tokens);
        return;
      }
    const int64_t nsb = a.n / kKQuantSuperBlock;
    __m256 acc[static_cast<size_t>(T)];
    for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
    for (int64_t s = 0; s < nsb; ++s) {
      const uint8_t* rec = a.w + static_cast<size_t>(s) * RK::kRecordBytes;
      // the stream kKQuantPrefetchBytes ahead (the next group's first records at a row's end)
      prefetch_l2(rec + kKQuantPrefetchBytes, RK::kRecordBytes);
      RK::template decode_avx2<T>(rec, a, s, acc);
    }
    for (int t = 0; t < T; ++t) store_lane_tile(a, n_rows, t, acc[t]);
  }
};
#endif  // LLMCTL_HAVE_X86

// The AVX2 MatmulKernel over repacked RK weights (MatmulKernel::repacked): 8-row tiles, KQ's
// tokens per prefill tile; none (tile == nullptr) off x86.
template <class RK>
MatmulKernel make_repacked_kernel_avx2(const char* name) {
#if defined(LLMCTL_HAVE_X86)
  using KQ = typename RK::KQ;
  using Tile = RepackedTileAvx2<RK>;
  MatmulKernel k;
  k.name = name;
  k.quantized = true;
  set_kquant_activations<KQ>(k);
  k.rows_decode = kQuantTileRows;
  k.rows_prefill = kQuantTileRows;
  k.tokens_prefill = KQ::kTokens;
  k.tile = &dispatch_quant_tile<Tile>;
  k.pack = &Tile::pack;
  k.panel_bytes_per_block = Tile::kPanelBlockBytes;
  // Fewer tokens run from the records (tile without a panel): one thread, 2048x8192, the
  // records' unpacking into panels cost Q4_K 2.8x and Q6_K 4.6x the time at 2 tokens; from
  // 32 tokens on it pays for Q4_K, Q3_K and IQ4_XS.
  k.pack_min_tokens = 32;
  k.repacked = true;
  return k;
#else
  (void)name;
  return MatmulKernel{};
#endif
}

}  // namespace llmctl::cpu
