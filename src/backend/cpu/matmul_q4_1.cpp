// Q4_1 weights (20-byte blocks: fp16 d, fp16 m, 16 bytes of nibbles; w = q * d + m) against
// int8 activations: the quantized tile (matmul_quant_tile.h) with unsigned nibbles and the
// min term m * d_x * sum(q_x), as ggml's vec_dot_q4_1_q8_1.
#include "backend/cpu/matmul_quant_tile.h"

namespace llmctl::cpu {

namespace {

struct BlockQ4_1 {
  static constexpr size_t kBytes = 20;
  static constexpr bool kSigned = false;
  static constexpr bool kOffset8 = false;
  static constexpr bool kHasMin = true;
  static void weights(const uint8_t* blk, int* q) {
    for (int j = 0; j < 16; ++j) {
      q[j] = blk[4 + j] & 0x0f;
      q[j + 16] = blk[4 + j] >> 4;
    }
  }
#if defined(LLMCTL_HAVE_X86)
  LLMCTL_AVX2 static __m256i weights_avx2(const uint8_t* blk) {
    return unpack_nibbles_avx2(blk + 4);
  }
#endif
};

}  // namespace

MatmulKernel matmul_kernel_q4_1(bool avx2) {
  return make_quant_kernel<BlockQ4_1>(avx2, "q4_1 avx2", "q4_1 scalar", 4, 2, 3);
}

}  // namespace llmctl::cpu
