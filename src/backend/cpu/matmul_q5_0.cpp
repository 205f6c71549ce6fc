// Q5_0 weights (22-byte blocks: fp16 d, u32 qh, 16 bytes of nibbles; w = (q - 16) * d with
// q = nibble | qh bit << 4) against int8 activations: the quantized tile
// (matmul_quant_tile.h) with the nibbles' fifth bit and the offset 16, as ggml's
// vec_dot_q5_0_q8_0.
#include "backend/cpu/matmul_paired_tile_avx512.h"
#include "backend/cpu/matmul_repacked_quant_tile_avx2.h"

namespace llmctl::cpu {

namespace {

struct BlockQ5_0 : QuantBlockTraits {
  static constexpr size_t kBytes = 22;
  static constexpr size_t kQsOffset = 6;
  static constexpr bool kNibbles = true;
  static constexpr bool kOffset8 = true;  // q - 16 with kHighBit
  static constexpr bool kHasMin = false;
  static constexpr bool kHighBit = true;
  static constexpr size_t kQhOffset = 2;
};

}  // namespace

MatmulKernel matmul_kernel_q5_0(bool avx2) {
  return make_quant_kernel<BlockQ5_0>(avx2, "q5_0 avx2", "q5_0 scalar");
}

MatmulKernel matmul_kernel_q5_0_avx512() {
  return make_paired_kernel_avx512<QuantUnit, BlockQ5_0>("q5_0 avx512-vnni (decode avx2)");
}

MatmulKernel matmul_kernel_q5_0_repacked() {
  return make_repacked_quant_kernel_avx512<BlockQ5_0>("q5_0 avx512-vnni repacked-x16");
}

MatmulKernel matmul_kernel_q5_0_repacked_avx2() {
  return make_repacked_quant_kernel_avx2<BlockQ5_0>("q5_0 avx2 repacked-x16");
}

}  // namespace llmctl::cpu
