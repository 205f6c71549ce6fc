// IQ4_XS weights (136-byte super-blocks of 256: fp16 d, 6-bit scales of the 8 sub-blocks of 32
// in scales_h/scales_l, 128 bytes of nibbles; w = d * (ls - 32) * kIq4nlValues[nibble])
// against int8 activations: the quantized tile (matmul_quant_tile.h) over the 32-element
// sub-blocks, each an IQ4_NL block whose scale is d * (ls - 32), as ggml's vec_dot_iq4_xs_q8_K
// (which sums the same integer products, in its own float order).
#include "backend/cpu/matmul_paired_tile_avx512.h"

namespace llmctl::cpu {

namespace {

struct BlockIq4Xs : QuantBlockTraits {
  static constexpr size_t kBytes = 136;
  static constexpr size_t kQsOffset = 8;
  static constexpr bool kNibbles = true;
  static constexpr bool kLookup = true;
  static constexpr int64_t kSubBlocks = 8;
  // The signed scale ls - 32 of sub-block b (dequant.h's reading).
  static int sub_scale(const uint8_t* block, int b) { return iq4_xs_scale(block, b); }
#if defined(LLMCTL_HAVE_X86)
  // d * (ls - 32) of sub-block b for 8 rows (their super-block at byte blk), as quant_scale
  // computes it (both factors exact in float, one rounding of the product). The first 8 bytes
  // of a block, d | scales_h << 16 and scales_l, are read as two dwords per row.
  LLMCTL_AVX2 static __m256 scales_avx2(const uint8_t* const rows[8], size_t blk, int b) {
    const __m256i dh = gather_u32(rows, blk);     // d | scales_h << 16
    const __m256i l = gather_u32(rows, blk + 4);  // scales_l[0..3]
    // d: the low half of each dword, packed to 8 halves (bytes 0, 1, 4, 5, ... of each lane)
    const __m256i packed = _mm256_permute4x64_epi64(
        _mm256_shuffle_epi8(
            dh, _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1, 0, 1, 4,
                                 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1)),
        0x08);
    const __m256 d = _mm256_cvtph_ps(_mm256_castsi256_si128(packed));
    // ls = (scales_l >> 4b) & 15 | ((scales_h >> 2b) & 3) << 4; scales_l[b / 2] nibble b % 2 is
    // bits 4b..4b+3 of the dword
    const __m256i lo =
        _mm256_and_si256(_mm256_srl_epi32(l, _mm_cvtsi32_si128(4 * b)), _mm256_set1_epi32(15));
    const __m256i hi =
        _mm256_and_si256(_mm256_srl_epi32(dh, _mm_cvtsi32_si128(16 + 2 * b)), _mm256_set1_epi32(3));
    const __m256i ls = _mm256_or_si256(lo, _mm256_slli_epi32(hi, 4));
    return _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_sub_epi32(ls, _mm256_set1_epi32(32))));
  }
#endif
};

}  // namespace

MatmulKernel matmul_kernel_iq4_xs(bool avx2) {
  return make_quant_kernel<BlockIq4Xs>(avx2, "iq4_xs avx2", "iq4_xs scalar");
}

MatmulKernel matmul_kernel_iq4_xs_avx512() {
  return make_paired_kernel_avx512<QuantUnit, BlockIq4Xs>("iq4_xs avx512-vnni (decode avx2)");
}

}  // namespace llmctl::cpu
