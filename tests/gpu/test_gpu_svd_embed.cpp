// svd-embed's GPU path (the CUDA backend's gram_eigen: backend/cuda/gram_eigen_cuda.h, float64
// Gram by cuBLAS DGEMM, cuSOLVER Dsyevd) against LAPACK dgesdd (a direct float64 SVD,
// tests/support/svd_reference.h) and against the CPU backend (diag/gram_eigen.h through
// backend/cpu/gram_eigen_cpu.h), every singular value within 1e-6 sigma_max:
//   * random matrices, tall and wide (the wide one transposed by the CUDA backend), through the
//     backend, and with many blocks (a small block size, gram_eigen_f64 called directly);
//   * an ill-conditioned matrix (sigma over 6 decades);
//   * stories260K's token_embd (skipped when the model file is absent);
//   * the eigenvectors (G v = lambda v, orthonormal) and the low-rank estimate against the CPU's;
//   * a matrix whose Gram cannot fit: refused before any allocation, naming the shortfall.
// The op-level parity (CUDA gram_eigen against the CPU backend's) is test_gpu_gram_eigen.cpp.
// Exits 77 without a GPU (gpu_main.h).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <vector>

#include "backend/cpu/cpu_fast_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cusolver_loader.h"
#include "backend/cuda/gram_eigen_cuda.h"
#include "diag/gram_eigen.h"
#include "diag/svd_embed.h"
#include "gpu_main.h"
#include "io/gguf.h"
#include "support/svd_reference.h"
#include "support/test_data.h"

using namespace llmctl;
using namespace llmctl::test;  // support/svd_reference.h, test_data.h

namespace {

constexpr double kTolerance = 1e-6;  // the accuracy contract: |d sigma| <= 1e-6 sigma_max

cuda::CudaBackend& gpu() {
  static cuda::CudaBackend b(0);
  return b;
}

cpu::CpuFastBackend& cpu4() {
  static cpu::CpuFastBackend b(4);
  return b;
}

// sqrt of ascending eigenvalues, descending (as singular values).
std::vector<double> sigma_of(const std::vector<double>& lambda) {
  std::vector<double> s;
  for (auto it = lambda.rbegin(); it != lambda.rend(); ++it)
    s.push_back(std::sqrt(std::max(0.0, *it)));
  return s;
}

// GPU vs dgesdd and vs the CPU backend (float64 Gram and the default auto) on one matrix; for a
// tall one also the blocked Gram with `block_bytes` per block (gram_eigen_f64 directly: the
// backend uses the default block size).
void check_against_references(const std::vector<float>& a, int m, int n, size_t block_bytes) {
  const Spectrum got = singular_values(gpu(), a.data(), m, n, SpectrumOptions{});
  const std::vector<double> ref = reference_svd(a, m, n);
  SpectrumOptions f64;
  f64.gram = GramPrecision::F64;
  const Spectrum cpu = singular_values(cpu4(), a.data(), m, n, f64);
  const Spectrum cpu_auto = singular_values(cpu4(), a.data(), m, n, SpectrumOptions{});
  INFO(m << " x " << n << ", block " << block_bytes << " bytes, bound " << got.error_bound);
  REQUIRE(got.sigma.size() == ref.size());
  CHECK(max_rel_diff(got.sigma, ref) <= kTolerance);
  CHECK(max_rel_diff(got.sigma, cpu.sigma) <= kTolerance);
  CHECK(max_rel_diff(got.sigma, cpu_auto.sigma) <= kTolerance);
  CHECK(got.error_bound <= kTolerance);
  CHECK(got.gram_precision == "f64");
  if (m >= n) {
    const GpuGramEigen blocked = cuda::gram_eigen_f64(0, a.data(), m, n, false, block_bytes);
    CHECK(max_rel_diff(sigma_of(blocked.lambda), ref) <= kTolerance);
  }
}

}  // namespace

TEST_CASE("cuSOLVER loads with the symbols the GPU path uses", "[gpu]") {
  const cuda::CusolverApi& api = cuda::cusolver_api();
  CHECK(api.create != nullptr);
  CHECK(api.dsyevd != nullptr);
  CHECK(api.dsyevd_buffer_size != nullptr);
}

TEST_CASE("GPU singular values of random matrices match dgesdd and the CPU", "[gpu]") {
  // 2000 x 256 in blocks of 256 rows (7 full, one of 208) and in one block; a wide 300 x 900.
  const std::vector<float> tall = random_matrix(2000, 256, 5);
  check_against_references(tall, 2000, 256, 256 * 256 * 8);
  check_against_references(tall, 2000, 256, kGpuGramMaxBlockBytes);
  check_against_references(random_matrix(300, 900, 6), 300, 900, kGpuGramMaxBlockBytes);
}

TEST_CASE("GPU singular values of an ill-conditioned matrix match dgesdd", "[gpu]") {
  const std::vector<float> a = ill_conditioned_matrix(1500, 96, 6.0, 3);
  const std::vector<double> ref = reference_svd(a, 1500, 96);
  REQUIRE(ref.back() < 1e-5 * ref.front());  // really ill-conditioned
  check_against_references(a, 1500, 96, 300 * 96 * 8);
}

TEST_CASE("GPU singular values of stories260K's token_embd match dgesdd", "[gpu]") {
  const std::string dir = test::test_data_dir();
  const std::string path = dir + "/models/stories260K.gguf";
  if (dir.empty() || !std::ifstream(path).good()) {
    const char* require = std::getenv("LLMCTL_REQUIRE_TEST_DATA");
    if (require != nullptr && std::string(require) == "1") FAIL("missing " << path);
    WARN("skipped: models/stories260K.gguf not found (LLMCTL_TEST_DATA)");
    return;
  }
  const GgufFile f = GgufFile::open(path);
  const DenseMatrix e =
      dequantize_matrix(require_matrix(f, "token_embd.weight", "stories260K has token_embd"));
  check_against_references(e.data, static_cast<int>(e.n_rows), static_cast<int>(e.n_cols),
                           kGpuGramMaxBlockBytes);
}

TEST_CASE("GPU eigenvectors and the low-rank estimate agree with the CPU", "[gpu]") {
  const int m = 3000, n = 128;
  const std::vector<float> a = random_matrix(m, n, 9);
  const GpuGramEigen g = cuda::gram_eigen_f64(0, a.data(), m, n, true, 512 * n * 8);
  CHECK(g.block_rows == 512);
  // G = A^T A in float64 on the host; every column: ||G v - lambda v|| <= 1e-10 lambda_max,
  // ||v|| = 1, and v_i . v_j = 0 for the neighbouring column.
  const EigenErrors err = eigen_errors(naive_gram(a, m, n), g.lambda, g.vectors, n);
  CHECK(err.residual <= 1e-10);
  CHECK(err.norm <= 1e-10);
  CHECK(err.neighbour_dot <= 1e-10);

  DenseMatrix e;
  e.name = "random";
  e.n_rows = m;
  e.n_cols = n;
  e.data = a;
  SvdEmbedOptions opt;
  opt.spectrum.gram = GramPrecision::F64;
  opt.low_rank_options.rank = 8;
  const SvdEmbedReport want = analyze_embedding(cpu4(), e, opt);
  const SvdEmbedReport got = analyze_embedding(gpu(), e, opt);
  REQUIRE(got.low_rank.done);
  CHECK(got.low_rank.truncation_error == Approx(want.low_rank.truncation_error).epsilon(1e-8));
  CHECK(got.low_rank.reconstruction_error ==
        Approx(want.low_rank.reconstruction_error).epsilon(1e-3));
}

TEST_CASE("a Gram that cannot fit is refused before allocating, with the shortfall", "[gpu]") {
  // 300000 x 300000: G alone is 720 GB. The plan fails before `a` is read, so a small buffer
  // stands in for the matrix.
  const std::vector<float> dummy(16);
  CHECK_THROWS_WITH(
      cuda::gram_eigen_f64(0, dummy.data(), 300000, 300000, false),
      Catch::Contains("GPU memory") && Catch::Contains("short") && Catch::Contains("Gram matrix"));
}

int main(int argc, char** argv) {
  return llmctl::test::run_gpu_tests(argc, argv, "test_gpu_svd_embed");
}
