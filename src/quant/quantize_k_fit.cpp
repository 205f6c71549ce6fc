// Level fits of the K-quant encoders (quantize_k_fit.h), learnt from llama.cpp's helpers in
// ggml/src/ggml-quants.c. The arithmetic is theirs to the operation: every sum accumulates in
// float in element order, products associate left to right as written in the comments
// ("w*l*x" is (w * l) * x), and ints convert to float where C would convert them. Any
// reordering changes a rounding somewhere and so, in a few blocks, the bytes
// (tests/test_quantize_k.cpp compares against llama.cpp's output).
#include "quant/quantize_k_fit.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace llmctl::quant_detail {

namespace {

constexpr float kGroupMaxEps = 1e-15f;  // below this max |x| a group is all zero (ggml)

float f(int v) { return static_cast<float>(v); }

// The weight of element i: given, or x^2 when a fit defaults to it.
float weight_or_x2(const float* weights, const float* x, int i) {
  return weights != nullptr ? weights[i] : x[i] * x[i];
}

// Weighted error of the affine reconstruction scale * L + offset (offset = -min_out <= 0).
float affine_error(int n, const float* x, const float* weights, bool x2_default,
                   const uint8_t* L, float scale, float offset, bool use_mad) {
  float err = 0;
  for (int i = 0; i < n; ++i) {
    float diff = scale * f(L[i]) + offset - x[i];
    diff = use_mad ? std::fabs(diff) : diff * diff;
    const float w = x2_default ? weight_or_x2(weights, x, i) : weights[i];
    err += w * diff;
  }
  return err;
}

}  // namespace

float signed_max(const float* x, int n) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) amax = ax, max = x[i];
  }
  return max;
}

int nearest_level(float v) {
  const float biased = v + 12582912.0f;  // 1.5 * 2^23: the integer part lands in the mantissa
  int32_t bits;
  std::memcpy(&bits, &biased, sizeof bits);
  return (bits & 0x007fffff) - 0x00400000;
}

float fit_affine_levels(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                        float* min_out, float rmin, float rdelta, int nstep, bool use_mad,
                        bool x2_default) {
  float lo = x[0], hi = x[0];
  float sum_w = x2_default ? weight_or_x2(weights, x, 0) : weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < lo) lo = x[i];
    if (x[i] > hi) hi = x[i];
    const float w = x2_default ? weight_or_x2(weights, x, i) : weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (lo > 0) lo = 0;
  if (x2_default ? hi <= lo : hi == lo) {
    std::memset(L, 0, static_cast<size_t>(n));
    *min_out = -lo;
    return 0.0f;
  }
  // `lo` is the offset of the best fit so far: the trials below step from it, as ggml's do.
  float iscale = f(nmax) / (hi - lo);
  float scale = 1 / iscale;
  for (int i = 0; i < n; ++i) {
    const int l = nearest_level(iscale * (x[i] - lo));
    L[i] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
  }
  float best_error = affine_error(n, x, weights, x2_default, L, scale, lo, use_mad);
  if (nstep < 1) {
    *min_out = -lo;
    return scale;
  }
  uint8_t trial[32];
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * f(is) + f(nmax)) / (hi - lo);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      int l;
      if (x2_default) {
        const float v = iscale * (x[i] - lo);
        l = v > 0 ? nearest_level(v < f(nmax) ? v : f(nmax)) : 0;
      } else {
        l = std::max(0, std::min(nmax, nearest_level(iscale * (x[i] - lo))));
      }
      trial[i] = static_cast<uint8_t>(l);
      const float w = x2_default ? weight_or_x2(weights, x, i) : weights[i];
      sum_l += w * f(l);
      sum_l2 += w * f(l) * f(l);
      sum_xl += w * f(l) * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (!(det > 0)) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float this_offset = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (this_offset > 0) {
      this_offset = 0;
      this_scale = sum_xl / sum_l2;
    }
    const float err = affine_error(n, x, weights, x2_default, trial, this_scale, this_offset,
                                   use_mad);
    if (err < best_error) {
      std::memcpy(L, trial, static_cast<size_t>(n));
      best_error = err;
      scale = this_scale;
      lo = this_offset;
    }
  }
  *min_out = -lo;
  return scale;
}

float fit_symmetric_levels(int n, int nmax, const float* x, int8_t* L, const float* qw) {
  const float max = signed_max(x, n);
  if (std::fabs(max) < kGroupMaxEps) {
    std::memset(L, 0, static_cast<size_t>(n));
    return 0.0f;
  }
  // Sums of w*x*l and w*l*l for the rounding of x * iscale; levels stored when `store`.
  auto sums = [&](float iscale, bool store, float& sumlx, float& suml2) {
    sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::max(-nmax, std::min(nmax - 1, nearest_level(iscale * x[i])));
      if (store) L[i] = static_cast<int8_t>(l + nmax);
      const float w = weight_or_x2(qw, x, i);
      sumlx += w * x[i] * f(l);
      suml2 += w * f(l) * f(l);
    }
  };
  float sumlx, suml2;
  sums(f(-nmax) / max, true, sumlx, suml2);
  float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    const float iscale = -(f(nmax) + 0.1f * f(is)) / max;
    sums(iscale, false, sumlx, suml2);
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) {
        const int l = nearest_level(iscale * x[i]);
        L[i] = static_cast<int8_t>(nmax + std::max(-nmax, std::min(nmax - 1, l)));
      }
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

float fit_q3_levels(int n, int nmax, const float* x, int8_t* L) {
  const float max = signed_max(x, n);
  if (std::fabs(max) < kGroupMaxEps) {
    std::memset(L, 0, static_cast<size_t>(n));
    return 0.0f;
  }
  const float iscale = f(-nmax) / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = std::max(-nmax, std::min(nmax - 1, nearest_level(iscale * x[i])));
    L[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * f(l);
    suml2 += w * f(l) * f(l);
  }
  for (int itry = 0; itry < 5; ++itry) {
    int n_changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * f(L[i]);
      if (!(slx > 0)) continue;
      float sl2 = suml2 - w * f(L[i]) * f(L[i]);
      const int new_l = std::max(-nmax, std::min(nmax - 1, nearest_level(x[i] * sl2 / slx)));
      if (new_l == L[i]) continue;
      slx += w * x[i] * f(new_l);
      sl2 += w * f(new_l) * f(new_l);
      if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
        L[i] = static_cast<int8_t>(new_l);
        sumlx = slx;
        suml2 = sl2;
        ++n_changed;
      }
    }
    if (n_changed == 0) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

float fit_positive_levels(int n, int nmax, const float* x, uint8_t* L, const float* qw) {
  float max = 0;
  for (int i = 0; i < n; ++i) max = max > x[i] ? max : x[i];
  if (max < kGroupMaxEps) {
    std::memset(L, 0, static_cast<size_t>(n));
    return 0.0f;
  }
  float iscale = f(nmax) / max;
  for (int i = 0; i < n; ++i) L[i] = static_cast<uint8_t>(nearest_level(iscale * x[i]));
  const float scale = 1 / iscale;
  float best_mse = 0;
  for (int i = 0; i < n; ++i) {
    const float diff = x[i] - scale * f(L[i]);
    best_mse += qw[i] * diff * diff;
  }
  for (int is = -4; is <= 4; ++is) {
    if (is == 0) continue;
    const float iscale_is = (0.1f * f(is) + f(nmax)) / max;
    const float scale_is = 1 / iscale_is;
    float mse = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::min(nmax, nearest_level(iscale_is * x[i]));
      const float diff = x[i] - scale_is * f(l);
      mse += qw[i] * diff * diff;
    }
    if (mse < best_mse) best_mse = mse, iscale = iscale_is;
  }
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = std::min(nmax, nearest_level(iscale * x[i]));
    L[i] = static_cast<uint8_t>(l);
    sumlx += qw[i] * x[i] * f(l);
    suml2 += qw[i] * f(l) * f(l);
  }
  for (int itry = 0; itry < 5; ++itry) {
    int n_changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = qw[i];
      float slx = sumlx - w * x[i] * f(L[i]);
      float sl2 = suml2 - w * f(L[i]) * f(L[i]);
      if (!(slx > 0 && sl2 > 0)) continue;
      const int new_l = std::min(nmax, nearest_level(x[i] * sl2 / slx));
      if (new_l == L[i]) continue;
      slx += w * x[i] * f(new_l);
      sl2 += w * f(new_l) * f(new_l);
      if (slx * slx * suml2 > sumlx * sumlx * sl2) {
        L[i] = static_cast<uint8_t>(new_l);
        sumlx = slx;
        suml2 = sl2;
        ++n_changed;
      }
    }
    if (n_changed == 0) break;
  }
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

}  // namespace llmctl::quant_detail
