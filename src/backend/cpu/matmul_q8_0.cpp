// Q8_0 weights (34-byte blocks: fp16 d, int8 q[32]) against int8 activations: the quantized
// tile (matmul_quant_tile.h) with signed weights, as ggml's vec_dot_q8_0_q8_0.
#include "backend/cpu/matmul_repacked_quant_tile_avx2.h"

namespace llmctl::cpu {

namespace {

struct BlockQ8_0 : QuantBlockTraits {
  static constexpr size_t kBytes = 34;
  static constexpr size_t kQsOffset = 2;
  static constexpr bool kNibbles = false;
  static constexpr bool kOffset8 = false;
  static constexpr bool kHasMin = false;
};

}  // namespace

MatmulKernel matmul_kernel_q8_0(bool avx2) {
  return make_quant_kernel<BlockQ8_0>(avx2, "q8_0 avx2", "q8_0 scalar");
}

MatmulKernel matmul_kernel_q8_0_avx512() {
  return make_quant_kernel_avx512<BlockQ8_0>("q8_0 avx512-vnni");
}

MatmulKernel matmul_kernel_q8_0_repacked() {
  return make_repacked_quant_kernel_avx512<BlockQ8_0>("q8_0 avx512-vnni repacked-x16");
}

MatmulKernel matmul_kernel_q8_0_repacked_avx2() {
  return make_repacked_quant_kernel_avx2<BlockQ8_0>("q8_0 avx2 repacked-x16");
}

}  // namespace llmctl::cpu
