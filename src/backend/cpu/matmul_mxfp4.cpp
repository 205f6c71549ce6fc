// MXFP4 weights (17-byte blocks: E8M0 scale e, 16 bytes of nibbles; w = kMxfp4Values[nibble] *
// 2^(e - 128), dequant.h) against int8 activations: the quantized tile (matmul_quant_tile.h)
// with the nibbles looked up in ggml's doubled E2M1 table (pshufb) and the block scale from the
// E8M0 byte, as ggml's vec_dot_mxfp4_q8_0 (q8_0 activations). Exact integer sums per block;
// the same bits from the scalar, AVX2 and AVX-512 VNNI kernels. Also the AVX-512 and AVX2
// kernels over the 16-row repacked records (weight_repack.h: IQ4_NL's with one E8M0 byte a
// row), the levels + 128 against vpdpbusd.
#include "backend/cpu/matmul_paired_tile_avx512.h"
#include "backend/cpu/matmul_repacked_quant_tile_avx2.h"

namespace llmctl::cpu {

namespace {

struct BlockMxfp4 : QuantBlockTraits {
  static constexpr size_t kBytes = 17;
  static constexpr size_t kQsOffset = 1;
  static constexpr bool kNibbles = true;
  static constexpr bool kLookup = true;
  static constexpr const int8_t* kTable = kMxfp4Values;
  static constexpr bool kE8m0 = true;
  static constexpr int kLevelBias = 12;  // levels -12..12: unsigned 0..24 on AVX2
};

}  // namespace

MatmulKernel matmul_kernel_mxfp4(bool avx2) {
  return make_quant_kernel<BlockMxfp4>(avx2, "mxfp4 avx2", "mxfp4 scalar");
}

MatmulKernel matmul_kernel_mxfp4_avx512() {
  return make_paired_kernel_avx512<QuantUnit, BlockMxfp4>("mxfp4 avx512-vnni (decode avx2)");
}

MatmulKernel matmul_kernel_mxfp4_repacked() {
  return make_repacked_quant_kernel_avx512<BlockMxfp4>("mxfp4 avx512-vnni repacked-x16");
}

MatmulKernel matmul_kernel_mxfp4_repacked_avx2() {
  return make_repacked_quant_kernel_avx2<BlockMxfp4>("mxfp4 avx2 repacked-x16");
}

}  // namespace llmctl::cpu
