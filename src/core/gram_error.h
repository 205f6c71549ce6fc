#pragma once
// The error model of singular values computed from a Gram matrix (svd-embed; the argument is
// in diag/gram_eigen.h). Shared by the backends' Gram eigen-decomposition (Backend::gram_eigen
// in backend.h: the CPU's float32-product Gram decides by it whether to fall back to float64)
// and by diag, which reports the bound.
//
//   G (dim, dim) formed with ||G - A^T A||_2 <= gram_error_norm, eigenvalues by a float64
//   symmetric solver (backward error sqrt(dim) eps64 lambda_max): by Weyl's theorem each
//   eigenvalue moves by at most dl = gram_error_norm + sqrt(dim) eps64 lambda_max, so
//       |d sigma_i| <= min(sqrt(dl), dl / (sigma_i + sqrt(max(0, lambda_i - dl)))).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace llmctl {

inline constexpr double kGramEps64 = std::numeric_limits<double>::epsilon();

// max_i |d sigma_i| when every eigenvalue may move by dl (Weyl), relative to sigma_max.
inline double sigma_error_bound(const std::vector<double>& lambda_asc, double dl) {
  const double lmax = std::max(0.0, lambda_asc.back());
  if (lmax <= 0) return 0;
  double worst = 0;
  for (double l : lambda_asc) {
    const double s = std::sqrt(std::max(0.0, l));
    const double lower = std::sqrt(std::max(0.0, l - dl));
    const double d = (s + lower) > 0 ? std::min(std::sqrt(dl), dl / (s + lower)) : std::sqrt(dl);
    worst = std::max(worst, d);
  }
  return worst / std::sqrt(lmax);
}

// The float64 Gram's own rounding, as ||E||_2: a probabilistic model of K float64 products
// summed per entry (Higham & Mary), eps64 sqrt(K) trace(G).
inline double f64_gram_error(double trace, int64_t k) {
  return kGramEps64 * std::sqrt(static_cast<double>(k)) * trace;
}

// The per-sigma bound (relative to sigma_max) for eigenvalues `lambda_asc` (ascending, not
// empty) computed from a Gram with error `gram_error_norm`, the eigensolver's backward error
// added.
inline double spectrum_error_bound(const std::vector<double>& lambda_asc, double gram_error_norm,
                                   int64_t dim) {
  const double dl =
      gram_error_norm + std::sqrt(static_cast<double>(dim)) * kGramEps64 * lambda_asc.back();
  return sigma_error_bound(lambda_asc, dl);
}

}  // namespace llmctl
