// IQ4_NL and IQ4_XS encoders: llama.cpp's quantize_row_iq4_nl_impl (ggml/src/ggml-quants.c),
// learnt from it and checked byte for byte in tests/test_quantize_k.cpp. Both types, with
// or without an importance matrix, go through the same search (ggml's quantize_iq4_nl and
// quantize_iq4_xs call it with 7 trial steps either way): per 32-element block, the scale
// that maps the largest-magnitude element onto the table's end, refitted by weighted least
// squares, then 15 trial scales (table end + k, k = -7..7) kept when they raise
// sumqx^2 / sumq2. IQ4_XS then quantizes the 8 block scales to 6 bits against
// d = -max scale / 32. Weights: imatrix * sqrt(sigma2 + x^2) with sigma2 = 2 mean x^2 over
// the (super-)block, or x^2 without an importance matrix.
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "quant/dequant.h"
#include "quant/quantize_blocks.h"
#include "quant/quantize_k_fit.h"

namespace llmctl::quant_detail {

namespace {

float f(int v) { return static_cast<float>(v); }

// The table index nearest to v (kIq4nlValues is sorted): the upper of two neighbours from
// their midpoint on, found by binary search on 2v against the exact integer sum of the pair
// (ggml's best_index_int8).
int nearest_table_index(float v) {
  const float v2 = v + v;
  int idx = 0;
  for (int step = 8; step > 0; step >>= 1) {
    const int j = idx + step;
    if (v2 >= f(kIq4nlValues[j - 1] + kIq4nlValues[j])) idx = j;
  }
  return idx;
}

// One super-block of n (32 for IQ4_NL, 256 for IQ4_XS) as blocks of 32: fills L (table
// indices) and returns each block's scale in scales[].
void fit_blocks(int n, const float* x, const float* qw, float* scales, uint8_t* L) {
  float sigma2 = 0;
  for (int j = 0; j < n; ++j) sigma2 += x[j] * x[j];
  sigma2 *= 2.0f / f(n);
  const float v0 = f(kIq4nlValues[0]);
  for (int ib = 0; ib < n / 32; ++ib) {
    const float* xb = x + 32 * ib;
    uint8_t* Lb = L + 32 * ib;
    float weight[32];
    for (int j = 0; j < 32; ++j)
      weight[j] = qw != nullptr ? qw[32 * ib + j] * std::sqrt(sigma2 + xb[j] * xb[j])
                                : xb[j] * xb[j];
    const float max = signed_max(xb, 32);
    if (std::fabs(max) < 1e-15f) {
      scales[ib] = 0;
      std::memset(Lb, 0, 32);
      continue;
    }
    auto sums = [&](float id, bool store, float& sumqx, float& sumq2) {
      sumqx = 0, sumq2 = 0;
      for (int j = 0; j < 32; ++j) {
        const int l = nearest_table_index(id * xb[j]);
        if (store) Lb[j] = static_cast<uint8_t>(l);
        const float q = f(kIq4nlValues[l]), w = weight[j];
        sumqx += w * q * xb[j];
        sumq2 += w * q * q;
      }
    };
    float sumqx, sumq2;
    sums(1 / (-max / v0), true, sumqx, sumq2);
    float d = sumq2 > 0 ? sumqx / sumq2 : 0.0f;
    float best = d * sumqx;
    for (int itry = -7; itry <= 7; ++itry) {
      sums(f(itry + kIq4nlValues[0]) / max, false, sumqx, sumq2);
      if (sumq2 > 0 && sumqx * sumqx > best * sumq2) d = sumqx / sumq2, best = d * sumqx;
    }
    scales[ib] = d;
  }
}

void pack_nibbles(int n, const uint8_t* L, uint8_t* qs) {
  for (int i = 0; i < n / 32; ++i)
    for (int j = 0; j < 16; ++j)
      qs[16 * i + j] = static_cast<uint8_t>(L[32 * i + j] | (L[32 * i + 16 + j] << 4));
}

}  // namespace

void quantize_block_iq4(GgmlType type, const float* x, const float* w, uint8_t* out) {
  uint8_t L[256];
  float scales[8];
  if (type == GgmlType::IQ4_NL) {  // fp16 d, qs[16]
    fit_blocks(32, x, w, scales, L);
    const float d = scales[0];
    store_u16_le(out, f32_to_fp16(d));
    // The levels again for the float scale (not the rounded one), as ggml does.
    const float id = d != 0 ? 1 / d : 0.0f;
    for (int j = 0; j < 32; ++j) L[j] = static_cast<uint8_t>(nearest_table_index(id * x[j]));
    pack_nibbles(32, L, out + 2);
    return;
  }
  // IQ4_XS: fp16 d, u16 scales_h, scales_l[4], qs[128]
  fit_blocks(256, x, w, scales, L);
  const float d = -signed_max(scales, 8) / 32;
  store_u16_le(out, f32_to_fp16(d));
  const float id = d != 0 ? 1 / d : 0.0f;
  uint16_t scales_h = 0;
  uint8_t* scales_l = out + 4;
  std::memset(scales_l, 0, 4);
  for (int ib = 0; ib < 8; ++ib) {
    int l = nearest_level(id * scales[ib]);
    l = l < -32 ? -32 : (l > 31 ? 31 : l);
    const float dl = d * f(l);  // the float d, not the stored fp16 one
    const float idl = dl != 0 ? 1 / dl : 0.0f;
    for (int j = 0; j < 32; ++j)
      L[32 * ib + j] = static_cast<uint8_t>(nearest_table_index(idl * x[32 * ib + j]));
    l += 32;
    scales_l[ib / 2] = static_cast<uint8_t>(scales_l[ib / 2] | ((l & 0xF) << (4 * (ib % 2))));
    scales_h = static_cast<uint16_t>(scales_h | ((l >> 4) << (2 * ib)));
  }
  store_u16_le(out + 2, scales_h);
  pack_nibbles(256, L, out + 8);
}

}  // namespace llmctl::quant_detail
