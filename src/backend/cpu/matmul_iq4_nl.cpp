// IQ4_NL weights (18-byte blocks: fp16 d, 16 bytes of nibbles; w = d * kIq4nlValues[nibble])
// against int8 activations: the quantized tile (matmul_quant_tile.h) with the nibbles looked
// up in ggml's 16-level table (pshufb), signed weights as Q8_0's, as ggml's
// vec_dot_iq4_nl_q8_0. Also the AVX-512 and AVX2 kernels over the 16-row repacked records
// (weight_repack.h: Q4_0's layout, the same bytes), the levels + 128 against vpdpbusd.
#include "backend/cpu/matmul_paired_tile_avx512.h"
#include "backend/cpu/matmul_repacked_quant_tile_avx2.h"

namespace llmctl::cpu {

namespace {

struct BlockIq4Nl : QuantBlockTraits {
  static constexpr size_t kBytes = 18;
  static constexpr size_t kQsOffset = 2;
  static constexpr bool kNibbles = true;
  static constexpr bool kLookup = true;
};

}  // namespace

MatmulKernel matmul_kernel_iq4_nl(bool avx2) {
  return make_quant_kernel<BlockIq4Nl>(avx2, "iq4_nl avx2", "iq4_nl scalar");
}

MatmulKernel matmul_kernel_iq4_nl_avx512() {
  return make_paired_kernel_avx512<QuantUnit, BlockIq4Nl>("iq4_nl avx512-vnni (decode avx2)");
}

MatmulKernel matmul_kernel_iq4_nl_repacked() {
  return make_repacked_quant_kernel_avx512<BlockIq4Nl>("iq4_nl avx512-vnni repacked-x16");
}

MatmulKernel matmul_kernel_iq4_nl_repacked_avx2() {
  return make_repacked_quant_kernel_avx2<BlockIq4Nl>("iq4_nl avx2 repacked-x16");
}

}  // namespace llmctl::cpu
