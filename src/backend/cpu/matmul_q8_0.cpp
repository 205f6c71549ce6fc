// Q8_0 weights (34-byte blocks: fp16 d, int8 q[32]) against int8 activations: the quantized
// tile (matmul_quant_tile.h) with signed weights, as ggml's vec_dot_q8_0_q8_0.
#include "backend/cpu/matmul_quant_tile.h"

namespace llmctl::cpu {

namespace {

struct BlockQ8_0 {
  static constexpr size_t kBytes = 34;
  static constexpr bool kSigned = true;
  static constexpr bool kOffset8 = false;
  static constexpr bool kHasMin = false;
  static void weights(const uint8_t* blk, int* q) {
    for (int j = 0; j < 32; ++j) q[j] = static_cast<int8_t>(blk[2 + j]);
  }
#if defined(LLMCTL_HAVE_X86)
  LLMCTL_AVX2 static __m256i weights_avx2(const uint8_t* blk) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
  }
#endif
};

}  // namespace

MatmulKernel matmul_kernel_q8_0(bool avx2) {
  return make_quant_kernel<BlockQ8_0>(avx2, "q8_0 avx2", "q8_0 scalar", 4, 2, 3);
}

}  // namespace llmctl::cpu
