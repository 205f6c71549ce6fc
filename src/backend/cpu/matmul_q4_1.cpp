// Q4_1 weights (20-byte blocks: fp16 d, fp16 m, 16 bytes of nibbles; w = q * d + m) against
// int8 activations: the quantized tile (matmul_quant_tile.h) with unsigned nibbles and the
// min term m * d_x * sum(q_x), as ggml's vec_dot_q4_1_q8_1.
#include "backend/cpu/matmul_repacked_quant_tile_avx2.h"

namespace llmctl::cpu {

namespace {

struct BlockQ4_1 : QuantBlockTraits {
  static constexpr size_t kBytes = 20;
  static constexpr size_t kQsOffset = 4;
  static constexpr bool kNibbles = true;
  static constexpr bool kOffset8 = false;
  static constexpr bool kHasMin = true;
};

}  // namespace

MatmulKernel matmul_kernel_q4_1(bool avx2) {
  return make_quant_kernel<BlockQ4_1>(avx2, "q4_1 avx2", "q4_1 scalar");
}

MatmulKernel matmul_kernel_q4_1_avx512() {
  return make_quant_kernel_avx512<BlockQ4_1>("q4_1 avx512-vnni");
}

MatmulKernel matmul_kernel_q4_1_repacked() {
  return make_repacked_quant_kernel_avx512<BlockQ4_1>("q4_1 avx512-vnni repacked-x16");
}

MatmulKernel matmul_kernel_q4_1_repacked_avx2() {
  return make_repacked_quant_kernel_avx2<BlockQ4_1>("q4_1 avx2 repacked-x16");
}

}  // namespace llmctl::cpu
