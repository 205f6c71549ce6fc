#pragma once
// Singular values of a dense float32 matrix through its Gram matrix and a float64 symmetric
// eigensolver (BLAS syrk + LAPACK dsyev_2stage on the CPU).
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
//   the rest. Gram::F64 always uses float64 products.
//   The float64 Gram's own rounding (eps64 * sqrt(K) * ||A||_F^2 for K summed products)
//   limits any Gram method: singular values below ~1e-7 * sigma_max of a near-singular
//   matrix are not resolved; `error_bound` says how far each result can be trusted.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace llmctl {

enum class GramPrecision { Auto, F64 };

struct SpectrumOptions {
  GramPrecision gram = GramPrecision::Auto;
  double tolerance = 1e-6;  // target max |d sigma| / sigma_max (Auto's fallback threshold)
  int n_threads = 1;        // BLAS threads (and the error check's)
  bool keep_gram = false;   // return G (for top_eigenvectors)
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
  std::vector<double> gram;    // keep_gram: G (gram_n, gram_n), lower triangle valid
  int64_t gram_n = 0;
  // keep_gram on a device (singular_values_on): G's eigenvectors instead of G,
  // (gram_n, gram_n) column-major, column i for the i-th smallest eigenvalue.
  std::vector<double> eigenvectors;
};

// Singular values of A (m, n) row-major. Throws Error for an empty matrix, a non-finite
// entry's consequence (NaN eigenvalues) or a LAPACK failure.
Spectrum singular_values(const float* a, int64_t m, int64_t n, const SpectrumOptions& opt);

// G = A^T A's eigen-decomposition computed elsewhere (the GPU: cli wires gpu_utilities.h's
// gpu_gram_eigen in), for a tall A (m >= n) row-major: G from float64 products, a float64
// symmetric eigensolver. diag never sees the device; the caller says where it ran.
struct GramEigenResult {
  std::vector<double> lambda;   // (n,) eigenvalues of G, ascending
  std::vector<double> vectors;  // want_vectors: (n, n) column-major, column i for lambda[i]
  double seconds_gram = 0;      // forming G (transfers included)
  double seconds_eigen = 0;     // the eigensolver
};
using GramEigenFn =
    std::function<GramEigenResult(const float* a, int64_t m, int64_t n, bool want_vectors)>;

// singular_values with G formed and decomposed by `device` (always float64 products: the
// result is that of Gram::F64, with the same error model and bound; opt.gram and
// opt.tolerance do not change the computation). A wide A (m < n) is transposed on the host
// first (A and A^T have the same singular values). opt.keep_gram keeps G's eigenvectors in
// Spectrum::eigenvectors (a tall A only). Throws Error as singular_values does.
Spectrum singular_values_on(const GramEigenFn& device, const float* a, int64_t m, int64_t n,
                            const SpectrumOptions& opt);

// The r eigenvectors of the largest eigenvalues from `eigenvectors` (n, n) column-major in
// ascending eigenvalue order: (n, r) column-major, column 0 for the largest (the layout
// top_eigenvectors returns).
std::vector<double> top_columns(const std::vector<double>& eigenvectors, int64_t n, int64_t r);

// Eigenvectors of the symmetric G (n, n) (lower triangle read) for its r largest eigenvalues,
// returned (n, r) column-major, column 0 for the largest. With G = A^T A these are A's top
// right singular vectors (the low-rank storage estimate). One more tridiagonalization.
std::vector<double> top_eigenvectors(std::vector<double> gram, int64_t n, int64_t r);

// Sets the BLAS library's thread count (OpenBLAS; no-op for another BLAS).
void set_blas_threads(int n);

}  // namespace llmctl
