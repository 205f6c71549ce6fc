// Q4_0 weights (18-byte blocks: fp16 d, 16 bytes of nibbles; w = (q - 8) * d) against int8
// activations: the quantized tile (matmul_quant_tile.h) with signed weights q - 8 in -8..7,
// as ggml's vec_dot_q4_0_q8_0.
#include "backend/cpu/matmul_repacked_quant_tile_avx2.h"

namespace llmctl::cpu {

namespace {

struct BlockQ4_0 : QuantBlockTraits {
  static constexpr size_t kBytes = 18;
  static constexpr size_t kQsOffset = 2;
  static constexpr bool kNibbles = true;
  static constexpr bool kOffset8 = true;
  static constexpr bool kHasMin = false;
};

}  // namespace

MatmulKernel matmul_kernel_q4_0(bool avx2) {
  return make_quant_kernel<BlockQ4_0>(avx2, "q4_0 avx2", "q4_0 scalar");
}

MatmulKernel matmul_kernel_q4_0_avx512() {
  return make_quant_kernel_avx512<BlockQ4_0>("q4_0 avx512-vnni");
}

MatmulKernel matmul_kernel_q4_0_repacked() {
  return make_repacked_quant_kernel_avx512<BlockQ4_0>("q4_0 avx512-vnni repacked-x16");
}

MatmulKernel matmul_kernel_q4_0_repacked_avx2() {
  return make_repacked_quant_kernel_avx2<BlockQ4_0>("q4_0 avx2 repacked-x16");
}

}  // namespace llmctl::cpu
