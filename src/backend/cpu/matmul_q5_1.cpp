// Q5_1 weights (24-byte blocks: fp16 d, fp16 m, u32 qh, 16 bytes of nibbles; w = q * d + m
// with q = nibble | qh bit << 4) against int8 activations: the quantized tile
// (matmul_quant_tile.h) with the nibbles' fifth bit and the min term m * d_x * sum(q_x), as
// ggml's vec_dot_q5_1_q8_1.
#include "backend/cpu/matmul_paired_tile_avx512.h"
#include "backend/cpu/matmul_repacked_quant_tile_avx2.h"

namespace llmctl::cpu {

namespace {

struct BlockQ5_1 : QuantBlockTraits {
  static constexpr size_t kBytes = 24;
  static constexpr size_t kQsOffset = 8;
  static constexpr bool kNibbles = true;
  static constexpr bool kOffset8 = false;
  static constexpr bool kHasMin = true;
  static constexpr bool kHighBit = true;
  static constexpr size_t kQhOffset = 4;
};

}  // namespace

MatmulKernel matmul_kernel_q5_1(bool avx2) {
  return make_quant_kernel<BlockQ5_1>(avx2, "q5_1 avx2", "q5_1 scalar");
}

MatmulKernel matmul_kernel_q5_1_avx512() {
  return make_paired_kernel_avx512<QuantUnit, BlockQ5_1>("q5_1 avx512-vnni (decode avx2)");
}

MatmulKernel matmul_kernel_q5_1_repacked() {
  return make_repacked_quant_kernel_avx512<BlockQ5_1>("q5_1 avx512-vnni repacked-x16");
}

MatmulKernel matmul_kernel_q5_1_repacked_avx2() {
  return make_repacked_quant_kernel_avx2<BlockQ5_1>("q5_1 avx2 repacked-x16");
}

}  // namespace llmctl::cpu
