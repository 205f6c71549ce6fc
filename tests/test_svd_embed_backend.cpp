// svd-embed through the backend seam (Backend::gram_eigen, gram_eigen_checked in backend.h):
//   * the CPU backend's op against independent references: LAPACK dgesdd for the eigenvalues
//     (each sigma within the documented bound, core/gram_error.h, and 1e-6 sigma_max), the
//     float64 error model, and G v = lambda v with G formed by definition for the vectors;
//   * what diag does around the op, with a stand-in backend (the CPU backend with gram_eigen
//     replaced by a plain float64 Gram and LAPACK dsyev, the way a device backend plugs in):
//     the shape handed over, the eigenvectors asked for only when the low-rank estimate needs
//     them, gram_eigen_checked's default (float64), the order of the columns, the low-rank
//     estimate agreeing with the CPU's, and the seam's checks (a wrong-shaped answer, a NaN);
//   * backend/gpu_gram_eigen.h's memory plan (pure arithmetic).
// The CUDA backend's op against the CPU's: tests/gpu/test_gpu_gram_eigen.cpp.

#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_fast_backend.h"
#include "backend/gpu_gram_eigen.h"
#include "core/error.h"
#include "core/gram_error.h"
#include "diag/gram_eigen.h"
#include "diag/svd_embed.h"
#include "support/svd_reference.h"

extern "C" void dsyev_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda,
                       double* w, double* work, const int* lwork, int* info);

using namespace llmctl;
using namespace llmctl::test;  // support/svd_reference.h

namespace {

// A backend whose gram_eigen is G = A^T A (or A A^T) by definition in float64, then dsyev; it
// records what it was asked. `answer`, when set, replaces the result (a broken backend).
class FakeGramBackend final : public cpu::CpuBackend {
 public:
  int calls = 0;
  int64_t m = 0, n = 0;
  bool want_vectors = false;
  std::function<GramEigen(int64_t dim)> answer;

 protected:
  GramEigen gram_eigen_impl(const float* a, int64_t rows, int64_t cols, bool vectors) override {
    ++calls;
    m = rows;
    n = cols;
    want_vectors = vectors;
    const bool wide = rows < cols;
    const int dim = static_cast<int>(std::min(rows, cols));
    if (answer) return answer(dim);
    // A wide A: A A^T is the Gram of A^T.
    std::vector<float> t(a, a + rows * cols);
    if (wide)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) t[static_cast<size_t>(c * rows + r)] = a[r * cols + c];
    std::vector<double> g = naive_gram(t, static_cast<int>(std::max(rows, cols)), dim);
    GramEigen out;
    double trace = 0;
    for (int i = 0; i < dim; ++i) trace += g[static_cast<size_t>(i * dim + i)];
    out.gram_error_norm = f64_gram_error(trace, std::max(rows, cols));
    out.lambda.resize(static_cast<size_t>(dim));
    int lwork = -1, info = 0;
    double q = 0;
    const char* jobz = vectors ? "V" : "N";
    dsyev_(jobz, "L", &dim, g.data(), &dim, out.lambda.data(), &q, &lwork, &info);
    lwork = static_cast<int>(q);
    std::vector<double> work(static_cast<size_t>(lwork));
    dsyev_(jobz, "L", &dim, g.data(), &dim, out.lambda.data(), work.data(), &lwork, &info);
    REQUIRE(info == 0);
    if (vectors) out.vectors = std::move(g);
    return out;
  }
  // No float32 path, as on a device: the base class's default (gram_eigen_impl).
  GramEigen gram_eigen_checked_impl(const float* a, int64_t rows, int64_t cols, double tolerance,
                                    bool vectors) override {
    return Backend::gram_eigen_checked_impl(a, rows, cols, tolerance, vectors);
  }
};

// sqrt of ascending eigenvalues, descending (as singular values).
std::vector<double> sigma_of(const std::vector<double>& lambda) {
  std::vector<double> s;
  for (auto it = lambda.rbegin(); it != lambda.rend(); ++it)
    s.push_back(std::sqrt(std::max(0.0, *it)));
  return s;
}

}  // namespace

TEST_CASE("CPU backend gram_eigen: eigenvalues within the documented bound of dgesdd", "[cpu]") {
  cpu::CpuFastBackend cpu(2);
  for (const MatrixCase c :
       {MatrixCase{500, 64, false}, MatrixCase{40, 150, false}, MatrixCase{400, 40, true}}) {
    const std::vector<float> a = case_matrix(c, 21);
    const std::vector<double> ref = reference_svd(a, c.m, c.n);
    const GramEigen g = cpu.gram_eigen(a.data(), c.m, c.n, false);
    const double bound = spectrum_error_bound(g.lambda, g.gram_error_norm, std::min(c.m, c.n));
    INFO(c.m << " x " << c.n << " bound " << bound);
    REQUIRE(g.lambda.size() == ref.size());
    CHECK(std::is_sorted(g.lambda.begin(), g.lambda.end()));
    CHECK(g.vectors.empty());
    CHECK(std::string(g.gram_precision) == "f64");
    CHECK_FALSE(g.fell_back);
    CHECK(max_rel_diff(sigma_of(g.lambda), ref) <= bound);
    CHECK(bound <= 1e-6);
    // The float64 model: eps64 sqrt(K) trace(G), trace = ||A||_F^2 = sum sigma^2.
    double fro2 = 0;
    for (double v : ref) fro2 += v * v;
    CHECK(
        g.gram_error_norm ==
        Approx(std::ldexp(1.0, -52) * std::sqrt(double(std::max(c.m, c.n))) * fro2).epsilon(1e-9));
    // The checked variant: float32 products where they are accurate enough (the random
    // matrices), float64 again for the ill-conditioned one; either way within its bound.
    const GramEigen k = cpu.gram_eigen_checked(a.data(), c.m, c.n, 1e-6, false);
    const double kbound = spectrum_error_bound(k.lambda, k.gram_error_norm, std::min(c.m, c.n));
    CHECK(k.fell_back == c.ill);
    CHECK(std::string(k.gram_precision) == (c.ill ? "f64" : "f32"));
    CHECK(kbound <= 1e-6);
    CHECK(max_rel_diff(sigma_of(k.lambda), ref) <= kbound);
  }
}

TEST_CASE("CPU backend gram_eigen: eigenvectors of the Gram formed by definition", "[cpu]") {
  cpu::CpuFastBackend cpu(2);
  const int m = 600, n = 48;
  const std::vector<float> a = random_matrix(m, n, 17);
  const std::vector<double> gram = naive_gram(a, m, n);
  for (const bool checked : {false, true}) {
    const GramEigen g = checked ? cpu.gram_eigen_checked(a.data(), m, n, 1e-6, true)
                                : cpu.gram_eigen(a.data(), m, n, true);
    INFO("checked " << checked << " precision " << g.gram_precision);
    const EigenErrors e = eigen_errors(gram, g.lambda, g.vectors, n);
    // f32 products: G itself is off by gram_error_norm, so the residual is about that much.
    const double tol = checked ? 4 * g.gram_error_norm / g.lambda.back() + 1e-10 : 1e-10;
    CHECK(e.residual <= tol);
    CHECK(e.norm <= 1e-10);
    CHECK(e.neighbour_dot <= 1e-10);
  }
  // Eigenvectors only of A^T A (a tall A): asked for a wide one, the seam refuses.
  CHECK_THROWS_WITH(cpu.gram_eigen(a.data(), n, m, true), Catch::Contains("wide"));
}

TEST_CASE("singular_values through a backend: what it asks and what it reports", "[cpu]") {
  for (const MatrixCase c :
       {MatrixCase{500, 64, false}, MatrixCase{40, 150, false}, MatrixCase{400, 40, true}}) {
    const std::vector<float> a = case_matrix(c, 21);
    FakeGramBackend dev;
    SpectrumOptions opt;
    opt.gram = GramPrecision::Auto;  // the default gram_eigen_checked: float64 products
    const Spectrum s = singular_values(dev, a.data(), c.m, c.n, opt);
    const std::vector<double> ref = reference_svd(a, c.m, c.n);
    INFO(c.m << " x " << c.n << " bound " << s.error_bound);
    CHECK(dev.calls == 1);
    CHECK(dev.m == c.m);  // the shape as given: the backend handles a wide A
    CHECK(dev.n == c.n);
    CHECK_FALSE(dev.want_vectors);
    CHECK(s.gram_precision == "f64");
    CHECK_FALSE(s.fell_back);
    CHECK(max_rel_diff(s.sigma, ref) <= 1e-6);
    CHECK(s.error_bound <= 1e-6);
    CHECK(s.error_bound > 0);
  }
}

TEST_CASE("low-rank estimate through a stand-in backend equals the CPU backend's", "[cpu]") {
  DenseMatrix e;
  e.name = "random";
  e.n_rows = 512;
  e.n_cols = 64;
  e.data = random_matrix(512, 64, 99);
  // A dominant direction, so the 90% rank is small and well separated.
  for (int64_t r = 0; r < e.n_rows; ++r)
    for (int64_t c = 0; c < e.n_cols; ++c)
      e.data[static_cast<size_t>(r * 64 + c)] += static_cast<float>(c % 7) * 0.8f;
  SvdEmbedOptions opt;
  opt.spectrum.gram = GramPrecision::F64;
  opt.low_rank_options.rank = 5;
  cpu::CpuFastBackend cpu(2);
  const SvdEmbedReport want = analyze_embedding(cpu, e, opt);
  FakeGramBackend dev;
  const SvdEmbedReport got = analyze_embedding(dev, e, opt);
  CHECK(dev.want_vectors);  // the low-rank estimate needs V_r
  REQUIRE(got.low_rank.done);
  CHECK(got.low_rank.rank == 5);
  CHECK(max_rel_diff(got.spectrum.sigma, want.spectrum.sigma) <= 1e-9);
  CHECK(got.summary.rank90 == want.summary.rank90);
  CHECK(got.low_rank.truncation_error == Approx(want.low_rank.truncation_error).epsilon(1e-9));
  // V_r from another solver (signs and rounding differ); the rank-5 reconstruction does not.
  CHECK(got.low_rank.reconstruction_error ==
        Approx(want.low_rank.reconstruction_error).epsilon(1e-4));
  CHECK(got.low_rank.bytes == want.low_rank.bytes);
  CHECK(got.spectrum.eigenvectors.empty());  // released after use
  // --no-low-rank: no eigenvectors asked for.
  opt.low_rank = false;
  (void)analyze_embedding(dev, e, opt);
  CHECK_FALSE(dev.want_vectors);
}

TEST_CASE("top_columns takes the largest eigenvalues' columns, largest first", "[cpu]") {
  // 3 x 3, columns (ascending eigenvalues) 0: (1,2,3), 1: (4,5,6), 2: (7,8,9).
  const std::vector<double> v = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  CHECK(top_columns(v, 3, 2) == std::vector<double>{7, 8, 9, 4, 5, 6});
  CHECK(top_columns(v, 3, 3) == std::vector<double>{7, 8, 9, 4, 5, 6, 1, 2, 3});
  CHECK_THROWS_AS(top_columns(v, 3, 4), Error);
  CHECK_THROWS_AS(top_columns(v, 3, 0), Error);
}

TEST_CASE("a backend that returns the wrong shape or a NaN is an error", "[cpu]") {
  const std::vector<float> a = random_matrix(50, 8, 1);
  FakeGramBackend short_answer;
  short_answer.answer = [](int64_t) {
    GramEigen r;
    r.lambda = {1, 2, 3};
    return r;
  };
  CHECK_THROWS_WITH(singular_values(short_answer, a.data(), 50, 8, SpectrumOptions{}),
                    Catch::Contains("3 eigenvalues"));
  FakeGramBackend nan_answer;
  nan_answer.answer = [](int64_t dim) {
    GramEigen r;
    r.lambda.assign(static_cast<size_t>(dim), 1.0);
    r.lambda[0] = std::nan("");
    return r;
  };
  CHECK_THROWS_AS(singular_values(nan_answer, a.data(), 50, 8, SpectrumOptions{}), Error);
  std::vector<float> bad = a;
  bad[17] = std::nanf("");
  FakeGramBackend dev;
  CHECK_THROWS_WITH(singular_values(dev, bad.data(), 50, 8, SpectrumOptions{}),
                    Catch::Contains("entry (2, 1)"));
  CHECK_THROWS_WITH(dev.gram_eigen(a.data(), 0, 8, false), Catch::Contains("empty matrix"));
  CHECK_THROWS_WITH(dev.gram_eigen_checked(a.data(), 50, 8, 0.0, false),
                    Catch::Contains("tolerance"));
  CHECK(dev.calls == 0);  // refused by the seam before the backend is asked
}

TEST_CASE("GPU Gram memory plan: block rows, totals and the shortfall", "[cpu]") {
  constexpr size_t MiB = size_t{1} << 20, GiB = size_t{1} << 30;
  // 32000 x 2048: a row is 16 KiB in float64; a 256 MiB block holds 16384 rows.
  const size_t work = 40 * MiB;
  GpuGramMemoryPlan p = plan_gpu_gram_memory(32000, 2048, work, 100 * GiB, 140 * GiB);
  CHECK(p.block_rows == 16384);
  CHECK(p.block_bytes == 256 * MiB);
  CHECK(p.gram_bytes == 32 * MiB);
  CHECK(p.eigenvalue_bytes == 2048 * 8);
  CHECK(p.total() == 256 * MiB + 32 * MiB + 2048 * 8 + work + 4);
  // A small matrix: the whole of it in one block.
  p = plan_gpu_gram_memory(512, 64, 1 * MiB, 1 * GiB, 1 * GiB);
  CHECK(p.block_rows == 512);
  // Tight memory: exactly 1000 rows fit beside the fixed buffers and the 256 MiB reserve.
  const size_t fixed = 32 * MiB + 2048 * 8 + work + 4;
  p = plan_gpu_gram_memory(32000, 2048, work, fixed + 256 * MiB + 1000 * 16384 + 5, 80 * GiB);
  CHECK(p.block_rows == 1000);
  // 100 rows fit but 256 are needed: 156 rows (2.44 MiB) short.
  const size_t free_b = fixed + 256 * MiB + 100 * 16384;
  CHECK_THROWS_WITH(plan_gpu_gram_memory(32000, 2048, work, free_b, 80 * GiB),
                    Catch::Contains("(2.44 MiB short)") && Catch::Contains("32000 x 2048") &&
                        Catch::Contains("Gram matrix 32.00 MiB") && Catch::Contains("80.00 GiB"));
  // Not even the Gram fits: a 65536-wide matrix needs 32 GiB for G.
  CHECK_THROWS_WITH(plan_gpu_gram_memory(100000, 65536, 0, 24 * GiB, 24 * GiB),
                    Catch::Contains("Gram matrix 32.00 GiB") && Catch::Contains("short"));
  CHECK_THROWS_AS(plan_gpu_gram_memory(10, 20, 0, GiB, GiB), Error);  // wide: not handed over
}
