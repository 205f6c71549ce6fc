#pragma once
// Internal to the matmul fast path: the AVX-512 tiles over repacked K-quant weights
// (weight_repack.h: 8-row groups of pre-transposed super-block records), for a CPU with
// matmul_fast_has_avx512(). Same arithmetic contract as the in-place kernels
// (matmul_kquant_tile.h), so the same bits as the scalar kernel.
//
//   decode, and batches of fewer than 24 tokens (MatmulKernel::pack_min_tokens)
//                       8 rows: each record is read with plain 32-byte loads, nibbles and high
//                       bits split with shifts and masks, 256-bit vpdpbusd steps (AVX-512 VL
//                       VNNI: exact int32 sums, no int16 partial sums) for up to 4 tokens at
//                       once, the scales widened from bytes; no gathering or transposing of
//                       rows (RK::decode<T>).
//   prefill             16 rows (matmul_paired_tile_avx512.h's tile and record): the two 8-row
//                       groups' records unpacked (RK::unpack: the in-place kernel's 8-row panel
//                       record, the same bytes KQ::pack writes from the GGUF rows) and
//                       interleaved once per token chunk (pack16).
//
// Addressing: the kernel sees TileArgs::w_stride = an eighth of a group's bytes, so the tile of
// row r (always a multiple of 8: rows_per_task() is a multiple of 8 and 16) starts at
// w + r * w_stride, its group's first record.
//
// A repacked trait RK gives:
//   KQ                         the in-place trait (kPanelBytes, superblock<T>, superblock512<T>)
//   kRecordBytes               one 8-row record
//   unpack(rec, panel)         the 8-row panel record of KQ from a repacked record (AVX2: the
//                              AVX2 tiles of matmul_repacked_tile_avx2.h prefill with it too)
//   decode<T>(rec, a, sb, acc) acc[0..T) (8 rows, tokens 0..T-1) over super-block sb, from its
//                              record
//   optionally kPackWide, kPanelWeightBytes, unpack_scales(rec, panel) and weights512(rec0,
//   rec1, h, s, w[4]): pack16 then writes the weights (the panel's first kPanelWeightBytes) of
//   both groups at once, 64 bytes a vector, and unpacks only the rest per 8-row record (Q4_K,
//   Q5_K, Q6_K; at 64 tokens Q6_K 1.08x, Q5_K 1.06x, Q4_K 1.00x, one thread)

#include <algorithm>
#include <type_traits>

#include "backend/cpu/matmul_paired_tile_avx512.h"
#include "backend/cpu/matmul_repacked_tile_avx2.h"

namespace llmctl::cpu {

#if defined(LLMCTL_HAVE_X86)
LLMCTL_AVX512_BEGIN

// The 32 bytes at off of two 8-row records, rec0's in the low 256 bits (a 16-row panel
// vector; the prefill packs' weights512).
LLMCTL_AVX512 inline __m512i rp_both_groups(const uint8_t* rec0, const uint8_t* rec1, size_t off) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(kq_load(rec0 + off)), kq_load(rec1 + off), 1);
}

// One vpdpbusd step: sum += 4 unsigned weight bytes x 4 activation bytes, per row lane.
LLMCTL_AVX512 inline __m256i rp_dot4(__m256i sum, __m256i w_u8, const int8_t* x) {
  return _mm256_dpbusd_epi32(sum, w_u8, kq_bcast4(x));
}

template <class RK>
struct RepackedTile {
  using KQ = typename RK::KQ;

  // Decode, and the prefill of fewer tokens than MatmulKernel::pack_min_tokens: each record's
  // weights unpacked in registers once for up to kSmallTokens tokens (RK::decode<T>), with no
  // panel. A tile of more tokens takes them kSmallTokens at a time, and one of more than 8 rows
  // is two groups (the prefill tile's 16 rows). A type with kDecode16 (Q4_K, Q5_K) runs a
  // prefill tile's 16 rows and all its tokens in zmm registers instead (RK::decode16<T>: one
  // thread, 2048x8192, Q4_K 4 tokens 1.38x, 16 tokens 1.20x; Q6_K's, tried, lost at 8 tokens:
  // BENCHMARKS.md, 2026-12-06 midnight).
  static constexpr int kSmallTokens = 4;
  template <class R, class = void>
  struct HasDecode16 : std::false_type {};
  template <class R>
  struct HasDecode16<R, std::void_t<decltype(R::kDecode16)>> : std::true_type {};

  // The tile's two groups (one, read twice, for 8 rows or fewer) by RK::decode16<T>.
  template <int T>
  LLMCTL_AVX512 static void decode16_tile(const TileArgs& a, int n_rows) {
    const uint8_t* group[2] = {a.w, n_rows > 8 ? a.w + 8 * a.w_stride : a.w};
    __m512 acc[static_cast<size_t>(T)];
    for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t s = 0; s < a.n / kKQuantSuperBlock; ++s) {
      const uint8_t* rec[2];
      for (int g = 0; g < 2; ++g) {
        rec[g] = group[g] + static_cast<size_t>(s) * RK::kRecordBytes;
        // both streams kKQuantPrefetchBytes ahead, as decode_group's one
        prefetch_l2(rec[g] + kKQuantPrefetchBytes, RK::kRecordBytes);
      }
      RK::template decode16<T>(rec[0], rec[1], a, s, acc);
    }
    const __mmask16 store = static_cast<__mmask16>((1u << n_rows) - 1u);
    for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(a.out + t * a.out_stride, store, acc[t]);
  }

  template <int T>
  LLMCTL_AVX512 static void decode(const TileArgs& a, int n_rows) {
    static_assert(T <= 2 * kSmallTokens, "two token groups at most");
    if constexpr (HasDecode16<RK>::value && T > 1) {
      decode16_tile<T>(a, n_rows);
      return;
    }
    for (int g = 0; 8 * g < n_rows; ++g) {
      TileArgs ga = a;
      ga.w = a.w + 8 * static_cast<size_t>(g) * a.w_stride;
      ga.out = a.out + 8 * g;
      const int rows = std::min(8, n_rows - 8 * g);
      if constexpr (T <= kSmallTokens) {
        decode_group<T>(ga, rows);
      } else {
        decode_group<kSmallTokens>(ga, rows);
        decode_group<T - kSmallTokens>(tile_args_from_token(ga, kSmallTokens), rows);
      }
    }
  }
  template <int T>
  LLMCTL_AVX512 static void decode_group(const TileArgs& a, int n_rows) {
    const int64_t nsb = a.n / kKQuantSuperBlock;
    __m256 acc[static_cast<size_t>(T)];
    for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
    for (int64_t s = 0; s < nsb; ++s) {
      const uint8_t* rec = a.w + static_cast<size_t>(s) * RK::kRecordBytes;
      // the stream kKQuantPrefetchBytes ahead (the next group's first records at a row's end)
      prefetch_l2(rec + kKQuantPrefetchBytes, RK::kRecordBytes);
      RK::template decode<T>(rec, a, s, acc);
    }
    for (int t = 0; t < T; ++t) store_lane_tile(a, n_rows, t, acc[t]);
  }

  // Prefill: the 16-row panel of PairedTileAvx512 (rows 0..7: this group, 8..15: the next, or
  // this one again when the tile has 8 rows or fewer).
  // A type with kPackWide and weights512(rec0, rec1, h, s, w[4]) (the weights RK::weights
  // gives, of both groups' records at once: group 0 in the low 256 bits) writes its 16-row
  // weights directly, 64 bytes at a time, and only its scales go through the 8-row records
  // (unpack_scales).
  template <class R, class = void>
  struct HasWeights512 : std::false_type {};
  template <class R>
  struct HasWeights512<R, std::void_t<decltype(R::kPackWide)>> : std::true_type {};

  template <bool kWide>
  static constexpr size_t weights_end() {
    if constexpr (kWide) return RK::kPanelWeightBytes;
    return 0;
  }

  LLMCTL_AVX512 static void pack16(const TileArgs& a, int n_rows, uint8_t* panel) {
    const uint8_t* group[2] = {a.w, n_rows > 8 ? a.w + 8 * a.w_stride : a.w};
    alignas(64) uint8_t half[2][KQ::kPanelBytes];
    constexpr bool kWide = HasWeights512<RK>::value;
    constexpr size_t kFrom = weights_end<kWide>();  // what goes through half[] starts here
    for (int64_t s = 0; s < a.n / kKQuantSuperBlock; ++s) {
      const uint8_t* rec[2];
      for (int h = 0; h < 2; ++h) rec[h] = group[h] + static_cast<size_t>(s) * RK::kRecordBytes;
      uint8_t* out = panel + static_cast<size_t>(s) * 2 * KQ::kPanelBytes;
      if constexpr (kWide) {
        for (int h = 0; h < 2; ++h) RK::unpack_scales(rec[h], half[h]);
        for (int h = 0; h < 2; ++h)
          for (int st = 0; st < 8; ++st) {
            __m512i w[4];
            RK::weights512(rec[0], rec[1], h, st, w);
            for (int k = 0; k < 4; ++k)
              _mm512_storeu_si512(out + 2 * (256 * (4 * h + k) + 32 * st), w[k]);
          }
      } else {
        for (int h = 0; h < 2; ++h) RK::unpack(rec[h], half[h]);
      }
      for (size_t p = kFrom; p < KQ::kPanelBytes; p += 32) {
        const __m256i lo = _mm256_load_si256(reinterpret_cast<const __m256i*>(half[0] + p));
        const __m256i hi = _mm256_load_si256(reinterpret_cast<const __m256i*>(half[1] + p));
        _mm512_storeu_si512(out + 2 * p, _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1));
      }
    }
  }
};

// PairedTileAvx512's Unit over the repacked records: its 16-row compute, RepackedTile's decode.
template <class RK>
struct RepackedUnit {
  static constexpr size_t kRecordBytes = RK::KQ::kPanelBytes;
  static constexpr int64_t kElements = kKQuantSuperBlock;
  template <int T>
  LLMCTL_AVX512 static void compute(const uint8_t* p, const TileArgs& a, int64_t sb, __m512* acc) {
    RK::KQ::template superblock512<T>(p, a, sb, acc);
  }
  template <int T>
  LLMCTL_AVX512 static void decode(const TileArgs& a, int n_rows) {
    RepackedTile<RK>::template decode<T>(a, n_rows);
  }
};

LLMCTL_AVX512_END
#endif  // LLMCTL_HAVE_X86

// The MatmulKernel over repacked RK weights (MatmulKernel::repacked); none (tile == nullptr)
// off x86.
template <class RK>
MatmulKernel make_repacked_kernel_avx512(const char* name) {
#if defined(LLMCTL_HAVE_X86)
  MatmulKernel k =
      paired_tile_kernel<PairedTileAvx512<RepackedUnit<RK>>>(name, &RepackedTile<RK>::pack16);
  set_kquant_activations<typename RK::KQ>(k);
  // Fewer tokens run from the records (RepackedTile::decode): one thread, 2048x8192, the
  // 16-row pack cost Q4_K 3.2x and Q6_K 4.6x the time at 2 tokens. End to end (1B Q4_K_M, two
  // threads) the records won up to 20 tokens (12: 1.5x), tied at 24, lost from 28 on.
  k.pack_min_tokens = 24;
  k.repacked = true;
  return k;
#else
  (void)name;
  return MatmulKernel{};
#endif
}

}  // namespace llmctl::cpu
