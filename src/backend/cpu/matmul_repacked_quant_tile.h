#pragma once
// Internal to the matmul fast path: the AVX-512 VNNI tiles over repacked Q4_0 and Q8_0 weights
// (the AVX2 ones: matmul_repacked_quant_tile_avx2.h)
// (weight_repack.h: 16-row groups, one record of the 16 rows' scales and pre-transposed quants
// per 32-element block), for a CPU with matmul_fast_has_avx512(). Same arithmetic contract as
// the in-place tile (matmul_quant_tile_avx512.h), so the same bits as the scalar kernel:
//   isum = sum_j q_w[j] * q_x[j] exact in int32;  acc = fma(float(isum), d_w * d_x, acc)
//
// The in-place decode tile gathers the 16 rows' blocks (16 streams, a 4x4 dword transpose and
// a scale gather per block); here a tile reads one sequential stream with plain loads, and
// each 64-byte vector goes to vpdpbusd as it is (Q4_0: after a mask or a shift and a mask).
// Q8_0 is stored as q + 128 (unsigned), so isum = vpdpbusd sum - 128 * sum(x block), exact.
// One tile serves decode (T = 1) and prefill (T <= 8 tokens against the group, L2-resident
// while the token chunk passes): no packing step.
//
// Addressing: TileArgs::w_stride = a sixteenth of a group's bytes; the tile of row r (a
// multiple of 16: rows_per_task() is one) starts at w + r * w_stride, its group's first record.

#include <cstring>

#include "backend/cpu/matmul_quant_tile_avx512.h"

namespace llmctl::cpu {

// Decode prefetch distance into L2 (prefetcht1): far enough ahead that the line is in L2 when
// the tile reaches it at memory speed, not into L1, which the hardware L1 prefetcher fills
// from L2 (into L1 it evicted the activations and the lines in use).
constexpr size_t kRepackedPrefetchBytes = 4096;

#if defined(LLMCTL_HAVE_X86)
LLMCTL_AVX512_BEGIN

// Block: the in-place block trait (matmul_quant_tile.h) of Q4_0 (kNibbles, kOffset8: the
// weights are q - 8) or Q8_0 (stored q + 128); a record is the 16 rows' blocks, the same bytes.
template <class Block>
struct RepackedQuantTile {
  static_assert(!Block::kHasMin && Block::kNibbles == Block::kOffset8, "Q4_0 or Q8_0");
  static constexpr size_t kRecordBytes = 16 * Block::kBytes;
  // the integer correction per block: kOffset x the activation block's sum
  static constexpr int32_t kOffset = Block::kNibbles ? 8 : 128;

  LLMCTL_AVX512 static __m512i x4(const int8_t* qx, int s) {
    int32_t v;
    std::memcpy(&v, qx + 4 * s, 4);
    return _mm512_set1_epi32(v);
  }

  template <int T>
  LLMCTL_AVX512 static void tile(const TileArgs& a, int n_rows) {
    const int64_t nb = a.n / 32;
    __m512 acc[static_cast<size_t>(T)];
    for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* rec = a.w + static_cast<size_t>(b) * kRecordBytes;
      if constexpr (T == 1) {
        const char* ahead = reinterpret_cast<const char*>(rec + kRepackedPrefetchBytes);
        for (size_t o = 0; o < kRecordBytes; o += 64) _mm_prefetch(ahead + o, _MM_HINT_T1);
      }
      const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec)));
      const uint8_t* q = rec + 32;
      __m512i sum[static_cast<size_t>(T)];
      for (int t = 0; t < T; ++t) sum[t] = _mm512_setzero_si512();
      if constexpr (Block::kNibbles) {
        const __m512i low = _mm512_set1_epi8(0x0f);
        for (int k = 0; k < 4; ++k) {
          const __m512i v = _mm512_loadu_si512(q + 64 * k);
          const __m512i lo = _mm512_and_si512(v, low);                         // 4k .. 4k + 3
          const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);  // 16 + 4k ..
          for (int t = 0; t < T; ++t) {
            const int8_t* qx = a.qs + t * a.n + 32 * b;
            sum[t] = _mm512_dpbusd_epi32(sum[t], lo, x4(qx, k));
            sum[t] = _mm512_dpbusd_epi32(sum[t], hi, x4(qx, k + 4));
          }
        }
      } else {
        for (int s = 0; s < 8; ++s) {
          const __m512i v = _mm512_loadu_si512(q + 64 * s);
          for (int t = 0; t < T; ++t)
            sum[t] = _mm512_dpbusd_epi32(sum[t], v, x4(a.qs + t * a.n + 32 * b, s));
        }
      }
      for (int t = 0; t < T; ++t) {
        const int64_t tb = t * nb + b;
        const __m512i isum = _mm512_sub_epi32(sum[t], _mm512_set1_epi32(kOffset * a.qsum[tb]));
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum),
                                 _mm512_mul_ps(dw, _mm512_set1_ps(a.qd[tb])), acc[t]);
      }
    }
    const __mmask16 store = static_cast<__mmask16>((1u << n_rows) - 1u);
    for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(a.out + t * a.out_stride, store, acc[t]);
  }
};

LLMCTL_AVX512_END
#endif  // LLMCTL_HAVE_X86

// The MatmulKernel over repacked Block weights (MatmulKernel::repacked): the in-place AVX-512
// kernel's tile shapes (16 rows, 8 tokens), no packing; none (tile == nullptr) off x86.
template <class Block>
MatmulKernel make_repacked_quant_kernel_avx512(const char* name) {
  MatmulKernel k = make_quant_kernel_avx512<Block>(name);
#if defined(LLMCTL_HAVE_X86)
  k.tile = &dispatch_quant_tile<RepackedQuantTile<Block>>;
  k.pack = nullptr;
  k.panel_bytes_per_block = 0;
  k.repacked = true;
#endif
  return k;
}

}  // namespace llmctl::cpu
