// The importance-weighted scale search for the 32-element types Q4_0, Q5_0 (x = d (q - half))
// and Q4_1, Q5_1 (x = d q + m); the candidate set is documented in quant/quantize.h. Every
// candidate is encoded into real block bytes and decoded again, so the error compared is the
// error of what the file will hold (fp16 scale rounding included).
#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "core/fp16.h"
#include "quant/quantize_blocks.h"

namespace llmctl::quant_detail {

namespace {

constexpr int kSteps = 10;  // k = -10..10: scale candidates within +-1 level of the RTN step

struct Format {
  bool has_min;   // Q4_1, Q5_1
  int qmax;       // 15 or 31
  int half;       // offset of the symmetric types (8, 16); 0 for the affine ones
  size_t header;  // bytes before the quants
};

Format format_of(GgmlType type) {
  switch (type) {
    case GgmlType::Q4_0:
      return {false, 15, 8, 2};
    case GgmlType::Q5_0:
      return {false, 31, 16, 2};
    case GgmlType::Q4_1:
      return {true, 15, 0, 4};
    case GgmlType::Q5_1:
      return {true, 31, 0, 4};
    default:
      break;
  }
  throw Error(std::string("weighted quantization: unsupported type ") + ggml_type_name(type));
}

int clamp_level(double v, int lo, int hi) {
  const double r = std::nearbyint(v);
  return r < lo ? lo : (r > hi ? hi : static_cast<int>(r));
}

// q[j] in 0..qmax for x ~ d (q - half) + m (m = 0 for the symmetric types).
void levels(const Format& f, const float* x, double d, double m, int* q) {
  for (int j = 0; j < 32; ++j)
    q[j] = d != 0.0 ? clamp_level((static_cast<double>(x[j]) - m) / d + f.half, 0, f.qmax) : f.half;
}

// Weighted least squares of x ~ d (q - half) + m over the block, for fixed q. Returns false
// when the system is singular (every weighted q the same).
bool refit(const Format& f, const float* x, const float* w, const int* q, double* d, double* m) {
  double sw = 0, sq = 0, sqq = 0, sx = 0, sxq = 0;
  for (int j = 0; j < 32; ++j) {
    const double v = q[j] - f.half, wj = w[j], xj = x[j];
    sw += wj, sq += wj * v, sqq += wj * v * v, sx += wj * xj, sxq += wj * xj * v;
  }
  if (!f.has_min) {
    if (sqq <= 0) return false;
    *d = sxq / sqq;
    *m = 0;
    return true;
  }
  const double det = sw * sqq - sq * sq;
  if (!(std::fabs(det) > 1e-12 * sw * sqq)) return false;
  *d = (sw * sxq - sq * sx) / det;
  *m = (sqq * sx - sq * sxq) / det;
  return true;
}

class Best {
 public:
  Best(GgmlType type, const Format& f, const float* x, const float* w)
      : type_(type), f_(f), x_(x), w_(w) {}

  // Encodes (d, m, q) and keeps it when its weighted error is strictly smaller.
  void offer(double d, double m, const int* q) {
    uint8_t blk[32];
    std::memset(blk, 0, sizeof blk);
    store_u16_le(blk, f32_to_fp16(static_cast<float>(d)));
    if (f_.has_min) store_u16_le(blk + 2, f32_to_fp16(static_cast<float>(m)));
    pack_block_quants(type_, q, blk);
    offer_bytes(blk);
  }
  void offer_bytes(const uint8_t* blk) {
    const double e = weighted_block_error(type_, blk, x_, w_, 32);
    if (e < err_) {
      err_ = e;
      std::memcpy(best_, blk, sizeof best_);
    }
  }
  void write(uint8_t* out) const { std::memcpy(out, best_, ggml_traits(type_).type_size); }

 private:
  GgmlType type_;
  Format f_;
  const float* x_;
  const float* w_;
  double err_ = std::numeric_limits<double>::infinity();
  uint8_t best_[32] = {};
};

}  // namespace

void quantize_block_weighted(GgmlType type, const float* x, const float* w, uint8_t* out) {
  const Format f = format_of(type);
  Best best(type, f, x, w);
  uint8_t rtn[32];
  quantize_block_rtn(type, x, rtn);
  best.offer_bytes(rtn);  // first: ties keep RTN

  double amax = 0, max = 0, lo = x[0], hi = x[0];
  for (int j = 0; j < 32; ++j) {
    const double xj = x[j];
    if (amax < std::fabs(xj)) amax = std::fabs(xj), max = xj;
    lo = std::fmin(lo, static_cast<double>(x[j]));
    hi = std::fmax(hi, static_cast<double>(x[j]));
  }
  if (amax == 0) {
    best.write(out);
    return;
  }
  int q[32];
  auto try_candidate = [&](double d, double m) {
    levels(f, x, d, m, q);
    best.offer(d, m, q);
    double d2 = 0, m2 = 0;
    if (!refit(f, x, w, q, &d2, &m2)) return;
    best.offer(d2, m2, q);  // the least-squares scale for these levels
    levels(f, x, d2, m2, q);
    best.offer(d2, m2, q);  // and the levels re-rounded to it
  };
  for (int k = -kSteps; k <= kSteps; ++k) {
    if (f.has_min) {
      try_candidate((hi - lo) / (f.qmax + 0.1 * k), lo);
    } else {
      try_candidate(max / (-f.half + 0.1 * k), 0.0);     // max at the negative end
      try_candidate(max / (f.half - 1 + 0.1 * k), 0.0);  // max at the positive end
    }
  }
  best.write(out);
}

}  // namespace llmctl::quant_detail
