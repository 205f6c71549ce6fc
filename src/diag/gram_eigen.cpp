// Singular values from the Backend's Gram eigen-decomposition; see gram_eigen.h.

#include "diag/gram_eigen.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/error.h"
#include "core/gram_error.h"

namespace llmctl {
namespace {

// sigma_i = sqrt(max(lambda, 0)), descending, from ascending eigenvalues.
std::vector<double> sigma_from_lambda(const std::vector<double>& lambda) {
  for (double l : lambda) {
    if (!std::isfinite(l)) throw Error("the Gram matrix has a non-finite eigenvalue");
  }
  std::vector<double> sigma(lambda.size());
  for (size_t i = 0; i < lambda.size(); ++i)
    sigma[i] = std::sqrt(std::max(0.0, lambda[lambda.size() - 1 - i]));
  return sigma;
}

}  // namespace

Spectrum singular_values(Backend& backend, const float* a, int64_t m, int64_t n,
                         const SpectrumOptions& opt) {
  const bool want_vectors = opt.keep_vectors && m >= n;
  GramEigen g = opt.gram == GramPrecision::Auto
                    ? backend.gram_eigen_checked(a, m, n, opt.tolerance, want_vectors)
                    : backend.gram_eigen(a, m, n, want_vectors);
  Spectrum out;
  out.gram_precision = g.gram_precision;
  out.fell_back = g.fell_back;
  out.gram_error_norm = g.gram_error_norm;
  out.seconds_gram = g.seconds_gram;
  out.seconds_check = g.seconds_check;
  out.seconds_eigen = g.seconds_eigen;
  out.sigma = sigma_from_lambda(g.lambda);
  out.error_bound =
      spectrum_error_bound(g.lambda, out.gram_error_norm, static_cast<int64_t>(g.lambda.size()));
  if (want_vectors) {
    out.eigenvectors = std::move(g.vectors);
    out.gram_n = n;
  }
  return out;
}

std::vector<double> top_columns(const std::vector<double>& eigenvectors, int64_t n, int64_t r) {
  if (r < 1 || r > n || static_cast<int64_t>(eigenvectors.size()) != n * n)
    throw Error(fmt::format("top_columns: rank {} of {} eigenvectors of length {} ({} values)", r,
                            n, n, eigenvectors.size()));
  std::vector<double> out(static_cast<size_t>(n * r));
  for (int64_t j = 0; j < r; ++j)  // column j: the (j+1)-th largest, stored at n - 1 - j
    std::copy_n(eigenvectors.begin() + static_cast<std::ptrdiff_t>((n - 1 - j) * n), n,
                out.begin() + static_cast<std::ptrdiff_t>(j * n));
  return out;
}

}  // namespace llmctl
