#pragma once
// Singular values of a dense float32 matrix through its Gram matrix and a float64 symmetric
// eigensolver: the Backend op gram_eigen (backend.h; on the CPU BLAS syrk + LAPACK
// dsyev_2stage, backend/cpu/gram_eigen_cpu.h; on CUDA cuBLAS DGEMM + cuSOLVER Dsyevd,
// backend/cuda/gram_eigen_cuda.h). The error model is core/gram_error.h.
//
//   A (m, n) row-major float32  ->  G = A^T A (n, n) when m >= n, else A A^T (m, m)
//   sigma_i = sqrt(lambda_i(G)), i < k = min(m, n), in descending order.
//
// Accuracy (the target: every sigma within `tolerance` * sigma_max of a float64 SVD):
//   Gram::Auto forms G with float32 products (ssyrk over blocks of 2048 rows, the blocks
//   summed in float64), which is twice as fast as float64 but rounds. It then measures the
//   rounding: E = G32 - A^T A is applied to a few vectors with A^T A x evaluated in float64
//   (power iteration, 3 steps on 2 random vectors), and ||E||_2 is taken as twice the
//   largest ratio ||E x|| / ||x|| seen. By Weyl's theorem each eigenvalue then moves by at
//   most dl = ||E|| + the eigensolver's backward error (sqrt(n) * eps64 * lambda_max), so
//       |d sigma_i| <= min(sqrt(dl), dl / (sigma_i + sqrt(max(0, lambda_i - dl)))).
//   When the largest of these exceeds tolerance/2 * sigma_max, G is formed again from
//   float64 products (dsyrk) and the eigenvalues recomputed: the float32 path serves
//   well-conditioned matrices (a random 32000 x 2048 matrix: ~1e-8), the float64 path
//   the rest (Backend::gram_eigen_checked: the CPU's; a GPU forms the float64 Gram in
//   milliseconds and always does). Gram::F64 always uses float64 products.
//   The float64 Gram's own rounding (eps64 * sqrt(K) * ||A||_F^2 for K summed products)
//   limits any Gram method: singular values below ~1e-7 * sigma_max of a near-singular
//   matrix are not resolved; `error_bound` says how far each result can be trusted.

#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace llmctl {

enum class GramPrecision { Auto, F64 };

struct SpectrumOptions {
  GramPrecision gram = GramPrecision::Auto;
  double tolerance = 1e-6;    // target max |d sigma| / sigma_max (Auto's fallback threshold)
  bool keep_vectors = false;  // return G's eigenvectors (a tall A only: the low-rank estimate)
};

struct Spectrum {
  std::vector<double> sigma;   // k = min(m, n) singular values, descending
  std::string gram_precision;  // "f32" or "f64": the products the result came from
  bool fell_back = false;      // Auto tried float32 and needed float64
  double gram_error_norm = 0;  // estimated ||E||_2 of the Gram used (absolute)
  double error_bound = 0;      // max_i |d sigma_i| bound / sigma_max (see above)
  double seconds_gram = 0;     // forming G (both passes when it fell back)
  double seconds_check = 0;    // the float32 error estimate
  double seconds_eigen = 0;    // the eigensolver (both solves when it fell back)
  // keep_vectors: G's eigenvectors (gram_n, gram_n) column-major, column i for the i-th
  // smallest eigenvalue.
  std::vector<double> eigenvectors;
  int64_t gram_n = 0;
};

// Singular values of A (m, n) row-major, G formed and decomposed by `backend` (Auto:
// gram_eigen_checked with opt.tolerance; F64: gram_eigen). Throws Error for an empty matrix, a
// non-finite entry, a non-finite eigenvalue or a solver failure.
Spectrum singular_values(Backend& backend, const float* a, int64_t m, int64_t n,
                         const SpectrumOptions& opt);

// The r eigenvectors of the largest eigenvalues from `eigenvectors` (n, n) column-major in
// ascending eigenvalue order: (n, r) column-major, column 0 for the largest.
std::vector<double> top_columns(const std::vector<double>& eigenvectors, int64_t n, int64_t r);

}  // namespace llmctl
