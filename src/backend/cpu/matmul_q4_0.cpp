// Q4_0 weights (18-byte blocks: fp16 d, 16 bytes of nibbles; w = (q - 8) * d) against int8
// activations: the quantized tile (matmul_quant_tile.h) with signed weights q - 8 in -8..7,
// as ggml's vec_dot_q4_0_q8_0.
#include "backend/cpu/matmul_quant_tile.h"

namespace llmctl::cpu {

namespace {

struct BlockQ4_0 {
  static constexpr size_t kBytes = 18;
  static constexpr bool kSigned = false;
  static constexpr bool kOffset8 = true;
  static constexpr bool kHasMin = false;
  static void weights(const uint8_t* blk, int* q) {
    for (int j = 0; j < 16; ++j) {
      q[j] = (blk[2 + j] & 0x0f) - 8;
      q[j + 16] = (blk[2 + j] >> 4) - 8;
    }
  }
#if defined(LLMCTL_HAVE_X86)
  LLMCTL_AVX2 static __m256i weights_avx2(const uint8_t* blk) {
    return unpack_nibbles_avx2(blk + 2);  // q = w + 8 (kOffset8)
  }
#endif
};

}  // namespace

MatmulKernel matmul_kernel_q4_0(bool avx2) {
  return make_quant_kernel<BlockQ4_0>(avx2, "q4_0 avx2", "q4_0 scalar", 4, 2, 3);
}

}  // namespace llmctl::cpu
