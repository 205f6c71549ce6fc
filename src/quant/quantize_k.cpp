// K-quant encoders (Q4_K, Q5_K, Q6_K): our own scale search, documented in quant/quantize.h.
// Layouts in quant/dequant.h. Search arithmetic is in double, so no intermediate overflows for
// any finite float input; the stored fp16 scales saturate to inf only for ranges far beyond
// any model weight (|x| above ~6e7 for Q4_K).
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/fp16.h"
#include "quant/quantize_blocks.h"

namespace llmctl::quant_detail {

namespace {

constexpr int kSteps = 10;  // candidate step sizes: nmax + 0.1 k, k = -10..10

int nearest(double v, int lo, int hi) {
  const double r = std::nearbyint(v);  // ties to even (the default rounding mode)
  return r < lo ? lo : (r > hi ? hi : static_cast<int>(r));
}

double weight(const float* w, int j) { return w != nullptr ? static_cast<double>(w[j]) : 1.0; }

// Fit of one sub-block: x ~ s * q - m with q in 0..nmax, s >= 0, m >= 0 (Q4_K, Q5_K).
struct AffineFit {
  double s = 0, m = 0;
};

double affine_error(const float* x, const float* w, int n, int nmax, double s, double m) {
  double e = 0;
  for (int j = 0; j < n; ++j) {
    const double xj = x[j];
    const int q = s > 0 ? nearest((xj + m) / s, 0, nmax) : 0;
    const double r = xj - (s * q - m);
    e += weight(w, j) * r * r;
  }
  return e;
}

AffineFit fit_affine(const float* x, const float* w, int n, int nmax) {
  double lo = 0, hi = x[0];  // lo = min(min x, 0): the offset -m cannot be positive
  for (int j = 0; j < n; ++j) {
    lo = std::fmin(lo, static_cast<double>(x[j]));
    hi = std::fmax(hi, static_cast<double>(x[j]));
  }
  AffineFit best{0, -lo};
  if (!(hi > lo)) return best;  // all equal and <= 0: s = 0, m = -x
  best.s = (hi - lo) / nmax;
  double best_err = affine_error(x, w, n, nmax, best.s, best.m);
  for (int k = -kSteps; k <= kSteps; ++k) {
    const double iscale = (nmax + 0.1 * k) / (hi - lo);
    // Levels for this step from lo, then the weighted least-squares (s, offset) for them.
    double sw = 0, sq = 0, sqq = 0, sx = 0, sxq = 0;
    for (int j = 0; j < n; ++j) {
      const double xj = x[j];
      const double q = nearest((xj - lo) * iscale, 0, nmax), wj = weight(w, j);
      sw += wj, sq += wj * q, sqq += wj * q * q, sx += wj * xj, sxq += wj * xj * q;
    }
    const double det = sw * sqq - sq * sq;
    if (!(det > 1e-12 * sw * sqq)) continue;
    double s = (sw * sxq - sq * sx) / det;
    double off = (sqq * sx - sq * sxq) / det;
    if (off > 0) {  // the offset must be <= 0: refit the scale alone with offset 0
      off = 0;
      s = sqq > 0 ? sxq / sqq : 0;
    }
    if (!(s > 0)) continue;
    const double e = affine_error(x, w, n, nmax, s, -off);
    if (e < best_err) best_err = e, best = AffineFit{s, -off};
  }
  return best;
}

// Q4_K (nmax 15) and Q5_K (nmax 31), layout in dequant.h.
void encode_q45_k(bool five, const float* x, const float* w, uint8_t* out) {
  const int nmax = five ? 31 : 15;
  AffineFit fits[8];
  double max_s = 0, max_m = 0;
  for (int j = 0; j < 8; ++j) {
    fits[j] = fit_affine(x + 32 * j, w != nullptr ? w + 32 * j : nullptr, 32, nmax);
    max_s = std::fmax(max_s, fits[j].s);
    max_m = std::fmax(max_m, fits[j].m);
  }
  const float d = static_cast<float>(max_s / 63), dmin = static_cast<float>(max_m / 63);
  const uint16_t dh = f32_to_fp16(d), dminh = f32_to_fp16(dmin);
  const double dq = fp16_to_f32(dh), dminq = fp16_to_f32(dminh);
  int sc[8], mq[8];
  for (int j = 0; j < 8; ++j) {
    sc[j] = dq > 0 ? nearest(fits[j].s / dq, 0, 63) : 0;
    mq[j] = dminq > 0 ? nearest(fits[j].m / dminq, 0, 63) : 0;
  }
  std::memset(out, 0, five ? 176 : 144);
  store_u16_le(out, dh);
  store_u16_le(out + 2, dminh);
  uint8_t* s = out + 4;
  for (int j = 0; j < 8; ++j) {  // 6-bit packing, the inverse of k_scale_min()
    if (j < 4) {
      s[j] = static_cast<uint8_t>(s[j] | sc[j]);
      s[j + 4] = static_cast<uint8_t>(s[j + 4] | mq[j]);
    } else {
      s[j + 4] = static_cast<uint8_t>((sc[j] & 15) | ((mq[j] & 15) << 4));
      s[j - 4] = static_cast<uint8_t>(s[j - 4] | ((sc[j] >> 4) << 6));
      s[j] = static_cast<uint8_t>(s[j] | ((mq[j] >> 4) << 6));
    }
  }
  uint8_t* qh = out + 16;
  uint8_t* qs = five ? out + 48 : out + 16;
  for (int j = 0; j < 8; ++j) {
    // The levels for the scale and min the file holds (as dequantize computes them).
    const double ds = static_cast<double>(static_cast<float>(dq) * static_cast<float>(sc[j]));
    const double dm = static_cast<double>(static_cast<float>(dminq) * static_cast<float>(mq[j]));
    for (int l = 0; l < 32; ++l) {
      const double xv = x[32 * j + l];
      const int q = ds > 0 ? nearest((xv + dm) / ds, 0, nmax) : 0;
      uint8_t& b = qs[32 * (j / 2) + l];
      b = static_cast<uint8_t>(b | ((j % 2 == 0) ? (q & 15) : ((q & 15) << 4)));
      if (five) qh[l] = static_cast<uint8_t>(qh[l] | (((q >> 4) & 1) << j));
    }
  }
}

// Q6_K sub-block (16 elements): x ~ s * l with l in -32..31; s may be negative.
double fit_symmetric(const float* x, const float* w, int n) {
  double amax = 0, max = 0;
  for (int j = 0; j < n; ++j) {
    const double xj = x[j];
    if (std::fabs(xj) > amax) amax = std::fabs(xj), max = xj;
  }
  if (amax == 0) return 0;
  double best_s = max / -32.0, best_err = -1;
  for (int k = -kSteps; k <= kSteps; ++k) {
    const double iscale = -(32 + 0.1 * k) / max;
    double sxl = 0, sll = 0;
    for (int j = 0; j < n; ++j) {
      const double xj = x[j];
      const double l = nearest(xj * iscale, -32, 31), wj = weight(w, j);
      sxl += wj * xj * l, sll += wj * l * l;
    }
    if (!(sll > 0)) continue;
    const double s = sxl / sll;
    if (s == 0) continue;
    double e = 0;
    for (int j = 0; j < n; ++j) {
      const double xj = x[j];
      const double r = xj - s * nearest(xj / s, -32, 31);
      e += weight(w, j) * r * r;
    }
    if (best_err < 0 || e < best_err) best_err = e, best_s = s;
  }
  return best_s;
}

void encode_q6_k(const float* x, const float* w, uint8_t* out) {
  double s[16], max_scale = 0, amax = 0;
  for (int j = 0; j < 16; ++j) {
    s[j] = fit_symmetric(x + 16 * j, w != nullptr ? w + 16 * j : nullptr, 16);
    if (std::fabs(s[j]) > amax) amax = std::fabs(s[j]), max_scale = s[j];
  }
  std::memset(out, 0, 210);
  const uint16_t dh = f32_to_fp16(static_cast<float>(max_scale / -128));
  const double dq = fp16_to_f32(dh);
  store_u16_le(out + 208, dh);
  for (int j = 0; j < 16; ++j) {
    const int sc = dq != 0 ? nearest(s[j] / dq, -128, 127) : 0;
    const auto sc8 = static_cast<int8_t>(sc);
    std::memcpy(out + 192 + j, &sc8, 1);
    const double ds = static_cast<double>(static_cast<float>(dq) * static_cast<float>(sc));
    for (int l = 0; l < 16; ++l) {
      const int e = 16 * j + l;
      const double xe = x[e];
      const int q = (ds != 0 ? nearest(xe / ds, -32, 31) : 0) + 32;
      const int h = e / 128, k = (e % 128) / 32, i = e % 32;
      uint8_t& lo = out[64 * h + i + 32 * (k & 1)];
      lo = static_cast<uint8_t>(lo | (k < 2 ? (q & 15) : ((q & 15) << 4)));
      uint8_t& hi = out[128 + 32 * h + i];
      hi = static_cast<uint8_t>(hi | ((q >> 4) << (2 * k)));
    }
  }
}

void encode_k(GgmlType type, const float* x, const float* w, uint8_t* out) {
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

}  // namespace

void quantize_block_k(GgmlType type, const float* x, const float* w, uint8_t* out) {
  encode_k(type, x, nullptr, out);
  if (w == nullptr) return;
  uint8_t weighted[256];
  encode_k(type, x, w, weighted);
  if (weighted_block_error(type, weighted, x, w, 256) < weighted_block_error(type, out, x, w, 256))
    std::memcpy(out, weighted, ggml_traits(type).type_size);
}

}  // namespace llmctl::quant_detail
