// Q5_K weights (176-byte super-blocks of 256: Q4_K's fp16 d, dmin and 12 scale bytes, 32 bytes
// of fifth bits qh, 128 bytes of nibbles; w = (d*sc_j) * q - dmin*m_j, q in 0..31) against
// int8 activations: the K-quant tile (matmul_kquant_tile.h) with Q4_K's scales and arithmetic
// (trait matmul_q45_k.h), as ggml's vec_dot_q5_K_q8_K (one activation scale per super-block).
// Also the AVX-512 and AVX2 kernels over the repacked records (weight_repack.h; trait
// matmul_repacked_q45_k.h).
#include "backend/cpu/matmul_q45_k.h"
#include "backend/cpu/matmul_repacked_q45_k.h"

namespace llmctl::cpu {

MatmulKernel matmul_kernel_q5_k(bool avx2) {
  return make_kquant_kernel<KQ45_K<true>>(avx2, "q5_k avx2", "q5_k scalar");
}

MatmulKernel matmul_kernel_q5_k_avx512() {
  return make_paired_kernel_avx512<KQuantUnit, KQ45_K<true>>("q5_k avx512-vnni (decode avx2)");
}

MatmulKernel matmul_kernel_q5_k_repacked() {
  return make_repacked_kernel_avx512<RQ45_K<true>>("q5_k avx512-vnni repacked-x8");
}

MatmulKernel matmul_kernel_q5_k_repacked_avx2() {
  return make_repacked_kernel_avx2<RQ45_K<true>>("q5_k avx2 repacked-x8");
}

}  // namespace llmctl::cpu
