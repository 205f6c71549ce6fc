// K-quant encoders (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K): llama.cpp's algorithms, learnt from
// ggml/src/ggml-quants.c (quantize_row_q{2..6}_K_ref without an importance matrix,
// quantize_row_q{2..6}_K_impl with one), so the bytes are llama.cpp's (quant/quantize.h;
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

uint16_t load_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }

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

// Q2_K and Q3_K's 2-bit packing: element 128h + 32k + l is bits 2k..2k+1 of qs[32h + l].
void pack_2bit(const uint8_t* L, uint8_t* qs) {
  for (int h = 0; h < 2; ++h)
    for (int l = 0; l < 32; ++l) {
      const uint8_t* q = L + 128 * h + l;
      qs[32 * h + l] = static_cast<uint8_t>(q[0] | (q[32] << 2) | (q[64] << 4) | (q[96] << 6));
    }
}

// Q2_K: 16 sub-blocks of 16, each an affine fit to levels 0..3, the sub-block scales and mins
// quantized to 4 bits (low and high nibble of scales[j]) against d and dmin.
void encode_q2_k(const float* x, const float* qw, uint8_t* out) {
  uint8_t L[kSuper], Ls[16], Lm[16];
  float scales[16], mins[16], weights[16];
  uint8_t* packed = out;  // scales[16]
  if (qw == nullptr) {
    // quantize_row_q2_K_ref: weights |x|, a 16-step search on the absolute error, then 15
    // levels up to the largest scale and min (no clamp: ggml stores the int as it comes).
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 16; ++j) {
      for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
      scales[j] = fit_affine_levels(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], -0.5f, 0.1f,
                                    15, true, false);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }
    uint16_t dh = f32_to_fp16(0.0f), dminh = f32_to_fp16(0.0f);
    std::memset(packed, 0, 16);
    if (max_scale > 0) {
      const float iscale = 15.0f / max_scale;
      for (int j = 0; j < 16; ++j) packed[j] = static_cast<uint8_t>(nearest_level(iscale * scales[j]));
      dh = f32_to_fp16(max_scale / 15.0f);
    }
    if (max_min > 0) {
      const float iscale = 15.0f / max_min;
      for (int j = 0; j < 16; ++j)
        packed[j] = static_cast<uint8_t>(packed[j] | (nearest_level(iscale * mins[j]) << 4));
      dminh = f32_to_fp16(max_min / 15.0f);
    }
    store_u16_le(out + 80, dh);
    store_u16_le(out + 82, dminh);
  } else {
    // quantize_row_q2_K_impl: weights imatrix * sqrt(sigma2 + x^2) (sigma2 = mean x^2, not
    // twice it as for the other types), the 37-step search, the scales and mins fitted to
    // 15 levels weighted by their sub-block's total weight.
    const float sigma2 = sum_squares(x, kSuper) / f(kSuper);
    float sw[16];
    for (int j = 0; j < 16; ++j) {
      const float* xs = x + 16 * j;
      sw[j] = importance_weights(xs, qw + 16 * j, 16, sigma2, weights);
      scales[j] = fit_affine_levels(16, 3, xs, weights, L + 16 * j, &mins[j], -0.9f, 0.05f, 36,
                                    false, true);
    }
    store_u16_le(out + 80, f32_to_fp16(fit_positive_levels(16, 15, scales, Ls, sw)));
    store_u16_le(out + 82, f32_to_fp16(fit_positive_levels(16, 15, mins, Lm, sw)));
    for (int j = 0; j < 16; ++j) packed[j] = static_cast<uint8_t>(Ls[j] | (Lm[j] << 4));
  }
  const float d_all = fp16_to_f32(load_u16(out + 80)), dmin_all = fp16_to_f32(load_u16(out + 82));
  for (int j = 0; j < 16; ++j) {
    const float d = d_all * f(packed[j] & 0xF);
    if (d == 0) continue;
    const float dm = dmin_all * f(packed[j] >> 4);
    for (int i = 0; i < 16; ++i)
      L[16 * j + i] = static_cast<uint8_t>(clamp(nearest_level((x[16 * j + i] + dm) / d), 0, 3));
  }
  pack_2bit(L, out + 16);
}

// Q3_K's 6-bit signed sub-block scales (stored + 32) in 12 bytes: low nibbles in bytes 0..7
// (sub-blocks 8..15 in the high nibbles), the top two bits in bytes 8..11.
void pack_q3_scale(int j, int level, uint8_t* s) {
  if (j < 8)
    s[j] = static_cast<uint8_t>(s[j] | (level & 0xF));
  else
    s[j - 8] = static_cast<uint8_t>(s[j - 8] | ((level & 0xF) << 4));
  s[8 + j % 4] = static_cast<uint8_t>(s[8 + j % 4] | ((level >> 4) << (2 * (j / 4))));
}

int unpack_q3_scale(int j, const uint8_t* s) {
  const int lo = j < 8 ? s[j] & 0xF : s[j - 8] >> 4;
  return (lo | (((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
}

// Q3_K: 16 sub-blocks of 16, each a symmetric fit to -4..3, the scales a symmetric fit of
// their own to -32..31 against d.
void encode_q3_k(const float* x, const float* qw, uint8_t* out) {
  int8_t L[kSuper];
  float scales[16];
  uint8_t* s12 = out + 96;
  std::memset(s12, 0, 12);
  uint16_t dh = f32_to_fp16(0.0f);
  if (qw == nullptr) {
    // quantize_row_q3_K_ref: make_q3_quants per sub-block, then 32 levels from the scale of
    // largest magnitude.
    for (int j = 0; j < 16; ++j) scales[j] = fit_q3_levels(16, 4, x + 16 * j, L + 16 * j);
    const float max_scale = signed_max(scales, 16);
    if (max_scale != 0) {
      const float iscale = -32.0f / max_scale;
      for (int j = 0; j < 16; ++j) {
        const auto l = static_cast<int8_t>(nearest_level(iscale * scales[j]));
        pack_q3_scale(j, clamp(l, -32, 31) + 32, s12);
      }
      dh = f32_to_fp16(1 / iscale);
    }
  } else {
    // quantize_row_q3_K_impl: weights imatrix * sqrt(2 mean x^2 + x^2), make_qx_quants per
    // sub-block and again for the 16 scales weighted by their sub-block's total weight.
    const float sigma2 = f(2) * sum_squares(x, kSuper) / f(kSuper);
    float sw[16], weights[16];
    for (int j = 0; j < 16; ++j) {
      const float* xs = x + 16 * j;
      sw[j] = importance_weights(xs, qw + 16 * j, 16, sigma2, weights);
      scales[j] = fit_symmetric_levels(16, 4, xs, L + 16 * j, weights);
    }
    int8_t Ls[16];
    const float d_block = fit_symmetric_levels(16, 32, scales, Ls, sw);
    for (int j = 0; j < 16; ++j) pack_q3_scale(j, Ls[j], s12);
    dh = f32_to_fp16(d_block);
  }
  store_u16_le(out + 108, dh);
  const float d_all = fp16_to_f32(dh);
  for (int j = 0; j < 16; ++j) {
    const float d = d_all * f(unpack_q3_scale(j, s12));
    if (d == 0) continue;
    for (int i = 0; i < 16; ++i)
      L[16 * j + i] = static_cast<int8_t>(clamp(nearest_level(x[16 * j + i] / d), -4, 3) + 4);
  }
  // The third bit goes to hmask: element e sets bit e / 32 of hmask[e % 32].
  uint8_t low[kSuper];
  std::memset(out, 0, 32);
  for (int e = 0; e < kSuper; ++e) {
    int l = L[e];
    if (l > 3) {
      out[e % 32] = static_cast<uint8_t>(out[e % 32] | (1 << (e / 32)));
      l -= 4;
    }
    low[e] = static_cast<uint8_t>(l);
  }
  pack_2bit(low, out + 32);
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
    case GgmlType::Q2_K:
      encode_q2_k(x, w, out);
      break;
    case GgmlType::Q3_K:
      encode_q3_k(x, w, out);
      break;
    default:
      LLMCTL_ASSERT(false && "quantize_block_k: not a k-quant");
  }
}

}  // namespace llmctl::quant_detail
