#pragma once
// Internal to the matmul fast path: the AVX2 tiles over repacked Q4_0 and Q8_0 weights
// (weight_repack.h: 16-row groups, one record of the 16 rows' scales and pre-transposed quants
// per 32-element block), for a CPU with matmul_fast_has_avx2() (and the AVX-512 machines told
// LLMCTL_MATMUL_ISA=avx2). The in-place AVX2 tile's arithmetic (QuantTileAvx2 of
// matmul_quant_tile.h: its step and finish, maddubs with the sign trick for Q8_0, int16 sums
// for Q4_0's nibbles), so the same bits as the scalar kernel; only the weights' source differs.
//
// A record's 64-byte vector is 4 bytes of each of the 16 rows: its first 32 bytes are rows
// 0..7, exactly the register the in-place tile builds with a 4x4 dword transpose of 8 rows,
// and its last 32 bytes rows 8..15. So a record is two of the in-place tile's blocks
// (QuantTileAvx2::Unpacked), read with plain loads (Q4_0: a mask or a shift and a mask; Q8_0,
// stored q + 128: the sign bit flipped back), and the 16-row group is one sequential stream.
//
//   decode (one token)  16 rows (two 8-lane halves): each record read once, in order.
//   prefill             16 rows: the group's records unpacked once per token chunk into two of
//                       the in-place kernel's 8-row panels (the bytes QuantTileAvx2::pack
//                       writes from the GGUF rows), then its own block<T> over each.
//
// Addressing as matmul_repacked_quant_tile.h: TileArgs::w_stride is a sixteenth of a group's
// bytes and a tile (r a multiple of 16) starts at its group's first record.

#include <algorithm>

#include "backend/cpu/matmul_repacked_quant_tile.h"

namespace llmctl::cpu {

#if defined(LLMCTL_HAVE_X86)
template <class Block>
struct RepackedQuantTileAvx2 {
  static_assert(!Block::kHasMin && Block::kNibbles == Block::kOffset8, "Q4_0 or Q8_0");
  using Q = QuantTileAvx2<Block>;
  static constexpr size_t kRecordBytes = 16 * Block::kBytes;
  static constexpr size_t kPanelBlockBytes = Q::kPanelBlockBytes;  // per 8-row half

  // Rows 8h .. 8h + 7 of record rec as the in-place tile's block in registers.
  LLMCTL_AVX2 static void unpack_half(const uint8_t* rec, int h, typename Q::Unpacked& u) {
    const uint8_t* q = rec + 32 + 32 * h;
    if constexpr (Block::kNibbles) {
      const __m256i low = _mm256_set1_epi8(0x0f);
      for (int k = 0; k < 4; ++k) {
        const __m256i v = Q::load(q + 64 * k);
        u.w[k] = _mm256_and_si256(v, low);                            // elements 4k..4k+3
        u.w[k + 4] = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);  // 16 + 4k ..
        u.sgn[k] = u.w[k];  // unused by unsigned blocks
        u.sgn[k + 4] = u.w[k + 4];
      }
    } else {
      const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
      for (int s = 0; s < 8; ++s) {
        u.sgn[s] = _mm256_xor_si256(Q::load(q + 64 * s), flip);  // q + 128 back to q
        u.w[s] = _mm256_sign_epi8(u.sgn[s], u.sgn[s]);
      }
    }
    u.dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rec + 16 * h)));
    u.mw = _mm256_setzero_ps();
  }

  // Prefill: the group as two 8-row panels, rows 0..7 then (n_rows > 8) rows 8..15.
  LLMCTL_AVX2 static void pack(const TileArgs& a, int n_rows, uint8_t* panel) {
    const int64_t nb = a.n / 32;
    for (int h = 0; h < (n_rows > 8 ? 2 : 1); ++h)
      for (int64_t b = 0; b < nb; ++b) {
        typename Q::Unpacked u;
        unpack_half(a.w + static_cast<size_t>(b) * kRecordBytes, h, u);
        Q::store_block(u, panel + static_cast<size_t>(h * nb + b) * kPanelBlockBytes);
      }
  }

  template <int T>
  LLMCTL_AVX2 static void tile(const TileArgs& a, int n_rows) {
    const int64_t nb = a.n / 32;
    const int halves = n_rows > 8 ? 2 : 1;
    __m256 acc[2][static_cast<size_t>(T)];
    for (int h = 0; h < 2; ++h)
      for (int t = 0; t < T; ++t) acc[h][t] = _mm256_setzero_ps();
    if (a.panel != nullptr) {
      for (int h = 0; h < halves; ++h)
        for (int64_t b = 0; b < nb; ++b)
          Q::template block<T>(a.panel + static_cast<size_t>(h * nb + b) * kPanelBlockBytes, a,
                               b, acc[h]);
    } else {  // decode (T > 1 without a panel does not occur in run_rows: the same bits anyway)
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* rec = a.w + static_cast<size_t>(b) * kRecordBytes;
        if constexpr (T == 1) {
          const char* ahead = reinterpret_cast<const char*>(rec + kRepackedPrefetchBytes);
          for (size_t o = 0; o < kRecordBytes; o += 64) _mm_prefetch(ahead + o, _MM_HINT_T1);
        }
        for (int h = 0; h < halves; ++h) {
          typename Q::Unpacked u;
          unpack_half(rec, h, u);
          Q::template block_unpacked<T>(u, a, b, acc[h]);
        }
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
  k.pack = &Tile::pack;
  k.panel_bytes_per_block = 2 * Tile::kPanelBlockBytes;
  k.repacked = true;
#endif
  (void)name;
  return k;
}

}  // namespace llmctl::cpu
