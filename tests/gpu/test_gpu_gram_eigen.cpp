// The Backend op gram_eigen (backend.h) on the CUDA backend against the CPU reference backend
// (the oracle; both float64 Gram products and a float64 eigensolver, so they agree within the
// documented error model, not in bits):
//   * eigenvalues: each sigma = sqrt(lambda) of the two within the sum of their bounds
//     (core/gram_error.h spectrum_error_bound) x sigma_max, on a tall, a wide and an
//     ill-conditioned matrix; the float64 error model (gram_error_norm) agrees;
//   * eigenvectors: both are eigenvectors of the Gram formed by definition (residual,
//     unit length, orthogonal neighbours) and the top ones agree up to sign;
//   * gram_eigen_checked on CUDA is the float64 op (no float32 path there).
// Runs only where a GPU is visible; main() (test_gpu_backend_main.cpp) exits 77 elsewhere.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "core/gram_error.h"
#include "support/svd_reference.h"

using namespace llmctl;
using namespace llmctl::test;  // support/svd_reference.h

namespace {

// max_i |sqrt(x_i) - sqrt(y_i)| / sqrt(max y) over ascending eigenvalues.
double sigma_diff(const std::vector<double>& x, const std::vector<double>& y) {
  REQUIRE(x.size() == y.size());
  double d = 0;
  for (size_t i = 0; i < x.size(); ++i)
    d = std::max(d, std::fabs(std::sqrt(std::max(0.0, x[i])) - std::sqrt(std::max(0.0, y[i]))));
  return d / std::sqrt(y.back());
}

}  // namespace

TEST_CASE("gram_eigen: CUDA eigenvalues agree with the CPU backend's within the bound", "[gpu]") {
  cpu::CpuBackend cpu;
  cuda::CudaBackend gpu(0);
  for (const MatrixCase c :
       {MatrixCase{3000, 128, false}, MatrixCase{200, 700, false}, MatrixCase{1500, 96, true}}) {
    const std::vector<float> a = case_matrix(c, 31);
    const GramEigen want = cpu.gram_eigen(a.data(), c.m, c.n, false);
    const GramEigen got = gpu.gram_eigen(a.data(), c.m, c.n, false);
    const int64_t dim = std::min(c.m, c.n);
    const double bound = spectrum_error_bound(want.lambda, want.gram_error_norm, dim) +
                         spectrum_error_bound(got.lambda, got.gram_error_norm, dim);
    INFO(c.m << " x " << c.n << " bound " << bound);
    REQUIRE(got.lambda.size() == static_cast<size_t>(dim));
    CHECK(got.vectors.empty());
    CHECK(std::string(got.gram_precision) == "f64");
    CHECK(sigma_diff(got.lambda, want.lambda) <= bound);
    CHECK(bound <= 2e-6);
    // The same model, from G's diagonal on the CPU and the eigenvalues' sum on CUDA.
    CHECK(got.gram_error_norm == Approx(want.gram_error_norm).epsilon(1e-9));
    // No float32 path on CUDA: the checked op is the float64 one.
    const GramEigen checked = gpu.gram_eigen_checked(a.data(), c.m, c.n, 1e-6, false);
    CHECK(std::string(checked.gram_precision) == "f64");
    CHECK_FALSE(checked.fell_back);
    CHECK(sigma_diff(checked.lambda, want.lambda) <= bound);
  }
}

TEST_CASE("gram_eigen: CUDA eigenvectors agree with the CPU backend's", "[gpu]") {
  cpu::CpuBackend cpu;
  cuda::CudaBackend gpu(0);
  const int m = 2000, n = 64;
  std::vector<float> a = random_matrix(m, n, 41);
  // Separated top eigenvalues: column c scaled by 1 + c / 8, so the top vectors are stable.
  for (int r = 0; r < m; ++r)
    for (int c = 0; c < n; ++c)
      a[static_cast<size_t>(r * n + c)] *= 1.0f + static_cast<float>(c) / 8.0f;
  const std::vector<double> gram = naive_gram(a, m, n);
  const GramEigen want = cpu.gram_eigen(a.data(), m, n, true);
  const GramEigen got = gpu.gram_eigen(a.data(), m, n, true);
  for (const GramEigen* g : {&want, &got}) {
    const EigenErrors e = eigen_errors(gram, g->lambda, g->vectors, n);
    CHECK(e.residual <= 1e-10);
    CHECK(e.norm <= 1e-10);
    CHECK(e.neighbour_dot <= 1e-10);
  }
  // The top 8 eigenvectors: |v_cuda . v_cpu| = 1 (the sign is arbitrary).
  for (int c = n - 8; c < n; ++c) {
    double dot = 0;
    for (int i = 0; i < n; ++i)
      dot += want.vectors[static_cast<size_t>(c * n + i)] *
             got.vectors[static_cast<size_t>(c * n + i)];
    INFO("column " << c);
    CHECK(std::fabs(std::fabs(dot) - 1) <= 1e-8);
  }
}
