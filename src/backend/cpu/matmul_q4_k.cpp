// Q4_K weights (144-byte super-blocks of 256: fp16 d, fp16 dmin, 12 bytes of 6-bit scales and
// mins, 128 bytes of nibbles; w = (d*sc_j) * q - dmin*m_j per 32-element sub-block j) against
// int8 activations: the K-quant tile (matmul_kquant_tile.h, trait matmul_q45_k.h), as ggml's
// vec_dot_q4_K_q8_K: one activation scale per super-block, exact integer sums scaled by the
// 6-bit sub-block scales and mins, one fma for the q part and one for the min part per
// super-block. Also the AVX-512 and AVX2 kernels over the repacked records
// (weight_repack.h; trait matmul_repacked_q45_k.h).
#include "backend/cpu/matmul_q45_k.h"
#include "backend/cpu/matmul_repacked_q45_k.h"

namespace llmctl::cpu {

MatmulKernel matmul_kernel_q4_k(bool avx2) {
  return make_kquant_kernel<KQ45_K<false>>(avx2, "q4_k avx2", "q4_k scalar");
}

MatmulKernel matmul_kernel_q4_k_avx512() {
  return make_paired_kernel_avx512<KQuantUnit, KQ45_K<false>>("q4_k avx512-vnni (decode avx2)");
}

MatmulKernel matmul_kernel_q4_k_repacked() {
  return make_repacked_kernel_avx512<RQ45_K<false>>("q4_k avx512-vnni repacked-x8");
}

MatmulKernel matmul_kernel_q4_k_repacked_avx2() {
  return make_repacked_kernel_avx2<RQ45_K<false>>("q4_k avx2 repacked-x8");
}

}  // namespace llmctl::cpu
