// The low-rank storage estimate of svd_embed.h: E ~ f16(C) f16(V_r)^T + dequant(quant(R)).
//
//   V_r (n_embd, r)   top right singular vectors, rounded to F16
//   C   (rows, r)     = E_rows V_r (sgemm), rounded to F16
//   R   (rows, n_embd) = E_rows - C V_r^T, quantized row by row in residual_type
// The errors are measured on up to max_rows evenly spaced rows (all rows of a small
// vocabulary); the truncation error comes from the spectrum and covers every row.

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/fp16.h"
#include "diag/svd_embed.h"
#include "quant/dequant.h"
#include "quant/quantize.h"

extern "C" void sgemm_(const char* transa, const char* transb, const int* m, const int* n,
                       const int* k, const float* alpha, const float* a, const int* lda,
                       const float* b, const int* ldb, const float* beta, float* c, const int* ldc);

namespace llmctl {
namespace {

float round_f16(float x) { return fp16_to_f32(f32_to_fp16(x)); }

}  // namespace

LowRankEstimate estimate_low_rank(const DenseMatrix& e, const std::vector<double>& sigma,
                                  const std::vector<double>& v, int64_t rank,
                                  const LowRankOptions& opt) {
  LowRankEstimate out;
  out.rank = rank;
  out.residual_type = opt.residual_type;
  const int64_t m = e.n_rows, n = e.n_cols;
  const GgmlTypeTraits tr = ggml_traits(opt.residual_type);
  if (!can_quantize(opt.residual_type) || !can_dequantize(opt.residual_type)) {
    out.skipped = fmt::format("cannot quantize to {}", tr.name);
    return out;
  }
  if (n % tr.block_size != 0) {
    out.skipped =
        fmt::format("n_embd {} is not a multiple of {}'s block of {}", n, tr.name, tr.block_size);
    return out;
  }
  if (rank < 1 || static_cast<size_t>(n * rank) > v.size())
    throw Error(fmt::format("low-rank estimate: rank {} outside [1, {}]", rank,
                            v.size() / static_cast<size_t>(n)));

  const double mn = static_cast<double>(m) * static_cast<double>(n);
  out.bytes_f16 = 2 * mn;
  out.bytes_direct =
      static_cast<double>(quantized_size(opt.residual_type, n)) * static_cast<double>(m);
  out.bytes = 2 * static_cast<double>(rank) * static_cast<double>(m + n) + out.bytes_direct;
  out.bits_per_weight = out.bytes * 8 / mn;
  out.bits_per_weight_direct = out.bytes_direct * 8 / mn;
  double total2 = 0, tail2 = 0;
  for (size_t i = 0; i < sigma.size(); ++i) {
    total2 += sigma[i] * sigma[i];
    if (static_cast<int64_t>(i) >= rank) tail2 += sigma[i] * sigma[i];
  }
  out.truncation_error = std::sqrt(tail2 / total2);

  // The rows measured, copied contiguous.
  const int64_t s = (opt.max_rows <= 0 || opt.max_rows >= m) ? m : opt.max_rows;
  std::vector<float> rows(static_cast<size_t>(s * n));
  for (int64_t i = 0; i < s; ++i) {
    const int64_t src = i * m / s;
    std::copy_n(e.data.data() + src * n, n, rows.data() + i * n);
  }
  std::vector<float> vr(static_cast<size_t>(n * rank));
  for (size_t i = 0; i < vr.size(); ++i) vr[i] = round_f16(static_cast<float>(v[i]));

  const int in = static_cast<int>(n), is = static_cast<int>(s), ir = static_cast<int>(rank);
  const float one = 1.0f, zero = 0.0f;
  std::vector<float> c(static_cast<size_t>(s * rank));  // (s, r) row-major = C^T column-major
  sgemm_("T", "N", &ir, &is, &in, &one, vr.data(), &in, rows.data(), &in, &zero, c.data(), &ir);
  for (float& x : c) x = round_f16(x);
  std::vector<float> approx(static_cast<size_t>(s * n));  // (s, n) row-major
  sgemm_("N", "N", &in, &is, &ir, &one, vr.data(), &in, c.data(), &ir, &zero, approx.data(), &in);

  std::vector<float> resid(static_cast<size_t>(n)), back(static_cast<size_t>(n));
  std::vector<uint8_t> q(quantized_size(opt.residual_type, n));
  double err_lr = 0, err_direct = 0, norm2 = 0;
  for (int64_t i = 0; i < s; ++i) {
    const float* a = rows.data() + i * n;
    const float* ap = approx.data() + i * n;
    for (int64_t j = 0; j < n; ++j) resid[static_cast<size_t>(j)] = a[j] - ap[j];
    quantize_row(opt.residual_type, resid.data(), q.data(), n);
    dequantize_row(opt.residual_type, q.data(), back.data(), n);
    for (int64_t j = 0; j < n; ++j) {
      const double d =
          static_cast<double>(a[j]) -
          (static_cast<double>(ap[j]) + static_cast<double>(back[static_cast<size_t>(j)]));
      err_lr += d * d;
      norm2 += static_cast<double>(a[j]) * static_cast<double>(a[j]);
    }
    quantize_row(opt.residual_type, a, q.data(), n);
    dequantize_row(opt.residual_type, q.data(), back.data(), n);
    for (int64_t j = 0; j < n; ++j) {
      const double d =
          static_cast<double>(a[j]) - static_cast<double>(back[static_cast<size_t>(j)]);
      err_direct += d * d;
    }
  }
  out.rows_measured = s;
  out.reconstruction_error = norm2 > 0 ? std::sqrt(err_lr / norm2) : 0;
  out.direct_error = norm2 > 0 ? std::sqrt(err_direct / norm2) : 0;
  out.done = true;
  return out;
}

}  // namespace llmctl
