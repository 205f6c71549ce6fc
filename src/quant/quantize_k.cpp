// K-quant encoders (Q4_K, Q5_K, Q6_K): llama.cpp's algorithms, learnt from
// ggml/src/ggml-quants.c (quantize_row_q{4,5,6}_K_ref without an importance matrix,
// quantize_row_q{4,5,6}_K_impl with one), so the bytes are llama.cpp's (quant/quantize.h;
// checked in tests/test_quantize_k.cpp). Layouts in quant/dequant.h; the level fits in
// quantize_k_fit.cpp. All arithmetic in float, in ggml's order of operations.
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/fp16.h"
#include "quant/quantize_blocks.h"
#include "quant/quantize_k_fit.h"

namespace llmctl::quant_detail {

namespace {

constexpr int kSuper = 256;  // QK_K

float f(int v) { return static_cast<float>(v); }

int clamp(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

// Q4_K/Q5_K's 12 bytes of 6-bit sub-block scales and mins; the inverse of dequant's
// k_scale_min (ggml's get_scale_min_k4).
void pack_scale_min(const uint8_t* ls, const uint8_t* lm, uint8_t* s) {
  std::memset(s, 0, 12);
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      s[j] = ls[j];
      s[j + 4] = lm[j];
    } else {
      s[j + 4] = static_cast<uint8_t>((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
      s[j - 4] = static_cast<uint8_t>(s[j - 4] | ((ls[j] >> 4) << 6));
      s[j] = static_cast<uint8_t>(s[j] | ((lm[j] >> 4) << 6));
    }
  }
}

void unpack_scale_min(int j, const uint8_t* s, int& sc, int& m) {
  if (j < 4) {
    sc = s[j] & 63;
    m = s[j + 4] & 63;
  } else {
    sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// sum of x^2 over n elements, in element order.
float sum_squares(const float* x, int n) {
  float s = 0;
  for (int i = 0; i < n; ++i) s += x[i] * x[i];
  return s;
}

// The _impl quantizers' weights imatrix * sqrt(sigma2 + x^2) of one sub-block of n; returns
// their sum (in element order).
float importance_weights(const float* xs, const float* qw, int n, float sigma2, float* weights) {
  for (int l = 0; l < n; ++l) weights[l] = qw[l] * std::sqrt(sigma2 + xs[l] * xs[l]);
  float sumw = 0;
  for (int l = 0; l < n; ++l) sumw += weights[l];
  return sumw;
}

// Q4_K (nmax 15) and Q5_K (nmax 31). Each 32-element sub-block gets an affine fit; the 8
// scales and 8 mins are then quantized to 6 bits against the super-block d and dmin, and the
// levels recomputed from the stored values.
void encode_q45_k(bool five, const float* x, const float* qw, uint8_t* out) {
  const int nmax = five ? 31 : 15;
  uint8_t L[kSuper], ls[8], lm[8];
  float scales[8], mins[8], weights[32];
  uint16_t dh, dminh;
  if (qw == nullptr) {
    // quantize_row_q{4,5}_K_ref: weights av_x + |x| per sub-block, a 21 (Q4_K) or 16 (Q5_K)
    // step search, then 63 levels up to the largest scale and min.
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; ++j) {
      const float* xs = x + 32 * j;
      const float av_x = std::sqrt(sum_squares(xs, 32) / f(32));
      for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xs[l]);
      scales[j] = fit_affine_levels(32, nmax, xs, weights, L + 32 * j, &mins[j],
                                    five ? -0.5f : -1.0f, 0.1f, five ? 15 : 20, false, false);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
    for (int j = 0; j < 8; ++j) {
      // uint8_t first, then the clamp, as ggml (a negative level wraps, then becomes 63)
      const auto s = static_cast<uint8_t>(nearest_level(inv_scale * scales[j]));
      const auto m = static_cast<uint8_t>(nearest_level(inv_min * mins[j]));
      ls[j] = s < 63 ? s : 63;
      lm[j] = m < 63 ? m : 63;
    }
    dh = f32_to_fp16(max_scale / 63.0f);
    dminh = f32_to_fp16(max_min / 63.0f);
  } else {
    // quantize_row_q{4,5}_K_impl: weights imatrix * sqrt(sigma2 + x^2), the 37-step search,
    // then the scales and mins themselves fitted to 63 levels weighted by their sub-block's
    // total weight.
    const float sigma2 = f(2) * sum_squares(x, kSuper) / f(kSuper);
    float sw[8];
    for (int j = 0; j < 8; ++j) {
      const float* xs = x + 32 * j;
      sw[j] = importance_weights(xs, qw + 32 * j, 32, sigma2, weights);
      scales[j] = fit_affine_levels(32, nmax, xs, weights, L + 32 * j, &mins[j], -0.9f, 0.05f,
                                    36, false, true);
    }
    dh = f32_to_fp16(fit_positive_levels(8, 63, scales, ls, sw));
    dminh = f32_to_fp16(fit_positive_levels(8, 63, mins, lm, sw));
  }
  store_u16_le(out, dh);
  store_u16_le(out + 2, dminh);
  pack_scale_min(ls, lm, out + 4);
  const float d_all = fp16_to_f32(dh), dmin_all = fp16_to_f32(dminh);
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    unpack_scale_min(j, out + 4, sc, m);
    const float d = d_all * f(sc);
    if (d == 0) continue;  // a zero scale keeps the fit's levels, as ggml does
    const float dm = dmin_all * f(m);
    for (int i = 0; i < 32; ++i)
      L[32 * j + i] = static_cast<uint8_t>(clamp(nearest_level((x[32 * j + i] + dm) / d), 0, nmax));
  }
  uint8_t* qs = out + (five ? 48 : 16);
  if (five) std::memset(out + 16, 0, 32);
  for (int n = 0; n < kSuper; n += 64) {
    const int pair = n / 64;  // sub-blocks 2 pair and 2 pair + 1 share 32 bytes of nibbles
    for (int l = 0; l < 32; ++l) {
      const int lo = L[n + l], hi = L[n + l + 32];
      qs[32 * pair + l] = static_cast<uint8_t>((lo & 15) | ((hi & 15) << 4));
      if (five)
        out[16 + l] = static_cast<uint8_t>(out[16 + l] | ((lo >> 4) << (2 * pair)) |
                                           ((hi >> 4) << (2 * pair + 1)));
    }
  }
}

// Q6_K: 16 sub-blocks of 16, each a symmetric fit to -32..31 (weights x^2, or the importance
// matrix as given), the sub-block scales quantized to int8 against d = max scale / -128.
void encode_q6_k(const float* x, const float* qw, uint8_t* out) {
  int8_t L[kSuper];
  float scales[16];
  for (int ib = 0; ib < 16; ++ib)
    scales[ib] = fit_symmetric_levels(16, 32, x + 16 * ib, L + 16 * ib,
                                      qw != nullptr ? qw + 16 * ib : nullptr);
  const float max_scale = signed_max(scales, 16);
  std::memset(out, 0, 210);
  if (std::fabs(max_scale) < 1e-15f) return;  // all zero: d = 0, every byte 0
  const float iscale = -128.0f / max_scale;
  const uint16_t dh = f32_to_fp16(1 / iscale);
  store_u16_le(out + 208, dh);
  int8_t sc[16];
  for (int ib = 0; ib < 16; ++ib) {
    const int s = nearest_level(iscale * scales[ib]);
    sc[ib] = static_cast<int8_t>(s < 127 ? s : 127);
  }
  std::memcpy(out + 192, sc, 16);
  const float d_all = fp16_to_f32(dh);
  for (int j = 0; j < 16; ++j) {
    const float d = d_all * f(sc[j]);
    if (d == 0) continue;
    for (int i = 0; i < 16; ++i)
      L[16 * j + i] = static_cast<int8_t>(clamp(nearest_level(x[16 * j + i] / d), -32, 31) + 32);
  }
  for (int h = 0; h < 2; ++h) {  // each half: 64 bytes of low nibbles, 32 of high bit pairs
    const int8_t* q = L + 128 * h;
    uint8_t* ql = out + 64 * h;
    uint8_t* qh = out + 128 + 32 * h;
    for (int l = 0; l < 32; ++l) {
      ql[l] = static_cast<uint8_t>((q[l] & 0xF) | ((q[l + 64] & 0xF) << 4));
      ql[l + 32] = static_cast<uint8_t>((q[l + 32] & 0xF) | ((q[l + 96] & 0xF) << 4));
      qh[l] = static_cast<uint8_t>((q[l] >> 4) | ((q[l + 32] >> 4) << 2) |
                                   ((q[l + 64] >> 4) << 4) | ((q[l + 96] >> 4) << 6));
    }
  }
}

}  // namespace

void quantize_block_k(GgmlType type, const float* x, const float* w, uint8_t* out) {
  switch (type) {
    case GgmlType::Q4_K:
      encode_q45_k(false, x, w, out);
      break;
    case GgmlType::Q5_K:
      encode_q45_k(true, x, w, out);
      break;
    case GgmlType::Q6_K:
      encode_q6_k(x, w, out);
      break;
    default:
      LLMCTL_ASSERT(false && "quantize_block_k: not a k-quant");
  }
}

}  // namespace llmctl::quant_detail
