// The importance-weighted encoders of the 32-element types Q4_0, Q5_0 (x = d (L - half)) and
// Q4_1, Q5_1 (x = d L + m): llama.cpp's quantize_row_q{4,5}_{0,1}_impl, learnt from
// ggml/src/ggml-quants.c, so the bytes are llama.cpp's for the same importance matrix
// (quant/quantize.h; checked in tests/test_quantize_k.cpp). Per row, sigma2 = mean x^2 over
// the whole row; per block, weights imatrix * sqrt(sigma2 + x^2), then the level fits the
// K-quants use (quantize_k_fit.h): the symmetric fit of make_qx_quants for Q4_0 / Q5_0, the
// 37-step affine fit of make_qkx3_quants for Q4_1 / Q5_1. All arithmetic in float, in ggml's
// order of operations.
#include <cmath>

#include "core/error.h"
#include "core/fp16.h"
#include "quant/quantize_blocks.h"
#include "quant/quantize_k_fit.h"

namespace llmctl::quant_detail {

namespace {

constexpr int kBlock = 32;

// sigma2 of one row: sum of x^2 in element order, in float, over the row length as float.
float row_sigma2(const float* x, int64_t n) {
  float sum_x2 = 0;
  for (int64_t j = 0; j < n; ++j) sum_x2 += x[j] * x[j];
  return sum_x2 / static_cast<float>(n);
}

void block_weights(const float* xb, const float* qw, float sigma2, float* weight) {
  for (int j = 0; j < kBlock; ++j) weight[j] = qw[j] * std::sqrt(sigma2 + xb[j] * xb[j]);
}

}  // namespace

void quantize_row_legacy_weighted(GgmlType type, const float* x, const float* qw, uint8_t* out,
                                  int64_t n) {
  const bool has_min = type == GgmlType::Q4_1 || type == GgmlType::Q5_1;
  const bool five = type == GgmlType::Q5_0 || type == GgmlType::Q5_1;
  LLMCTL_ASSERT((has_min || five || type == GgmlType::Q4_0) && n % kBlock == 0);
  const int nmax = five ? (has_min ? 31 : 16) : (has_min ? 15 : 8);
  const size_t block_bytes = ggml_traits(type).type_size;
  const float sigma2 = row_sigma2(x, n);
  float weight[kBlock];
  int q[kBlock];
  for (int64_t ib = 0; ib < n / kBlock; ++ib) {
    const float* xb = x + kBlock * ib;
    uint8_t* blk = out + static_cast<size_t>(ib) * block_bytes;
    block_weights(xb, qw + kBlock * ib, sigma2, weight);
    if (has_min) {
      // make_qkx3_quants(32, nmax, xb, weight, L, &min, Laux, -0.9f, 0.05f, 36, false):
      // x ~ d L - min, stored as m = -min.
      uint8_t L[kBlock];
      float min = 0;
      const float d = fit_affine_levels(kBlock, nmax, xb, weight, L, &min, -0.9f, 0.05f, 36,
                                        false, true);
      store_u16_le(blk, f32_to_fp16(d));
      store_u16_le(blk + 2, f32_to_fp16(-min));
      for (int j = 0; j < kBlock; ++j) q[j] = L[j];
    } else {
      // make_qx_quants(32, nmax, xb, L, 1, weight): L - nmax in -nmax..nmax-1.
      int8_t L[kBlock];
      const float d = fit_symmetric_levels(kBlock, nmax, xb, L, weight);
      store_u16_le(blk, f32_to_fp16(d));
      for (int j = 0; j < kBlock; ++j) q[j] = L[j];
    }
    pack_block_quants(type, q, blk);
  }
}

}  // namespace llmctl::quant_detail
