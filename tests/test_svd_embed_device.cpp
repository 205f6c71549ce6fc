// diag's device path for svd-embed (singular_values_on, top_columns, analyze_embedding with
// SvdEmbedOptions::device) on the CPU, with a stand-in "device": the float64 Gram by a plain
// loop and LAPACK dsyev. What the GPU itself computes is checked in tests/gpu; here the host
// logic around it: the shape handed over (a wide matrix transposed), the eigenvectors asked for
// only when the low-rank estimate needs them, the float64 error model, the order of the
// columns, and the low-rank estimate agreeing with the CPU path. Also
// backend/gpu_gram_eigen.h's memory plan (pure arithmetic).

#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "backend/gpu_gram_eigen.h"
#include "core/error.h"
#include "diag/gram_eigen.h"
#include "diag/svd_embed.h"
#include "support/svd_reference.h"

extern "C" void dsyev_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda,
                       double* w, double* work, const int* lwork, int* info);

using namespace llmctl;
using llmctl::test::ill_conditioned_matrix;
using llmctl::test::max_rel_diff;
using llmctl::test::random_matrix;
using llmctl::test::reference_svd;

namespace {

struct FakeDevice {
  int calls = 0;
  int64_t m = 0, n = 0;
  bool want_vectors = false;

  // G = A^T A (n, n) in float64 by definition, then dsyev.
  GramEigenResult operator()(const float* a, int64_t rows, int64_t cols, bool vectors) {
    ++calls;
    m = rows;
    n = cols;
    want_vectors = vectors;
    const int dim = static_cast<int>(cols);
    std::vector<double> g(static_cast<size_t>(dim * dim), 0.0);
    for (int64_t r = 0; r < rows; ++r)
      for (int i = 0; i < dim; ++i)
        for (int j = 0; j < dim; ++j)
          g[static_cast<size_t>(j * dim + i)] +=
              static_cast<double>(a[r * cols + i]) * static_cast<double>(a[r * cols + j]);
    GramEigenResult out;
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
};

GramEigenFn wrap(FakeDevice& d) {
  return [&d](const float* a, int64_t m, int64_t n, bool v) { return d(a, m, n, v); };
}

}  // namespace

TEST_CASE("device spectrum: tall, wide and ill-conditioned match dgesdd", "[cpu]") {
  struct Case {
    int m, n;
    bool ill;
  };
  for (const Case c : {Case{500, 64, false}, Case{40, 150, false}, Case{400, 40, true}}) {
    const std::vector<float> a = c.ill ? ill_conditioned_matrix(c.m, c.n, 6.0, 3)
                                       : random_matrix(c.m, c.n, 21 + static_cast<uint64_t>(c.m));
    FakeDevice dev;
    SpectrumOptions opt;
    opt.gram = GramPrecision::Auto;  // ignored on a device: always float64 products
    const Spectrum s = singular_values_on(wrap(dev), a.data(), c.m, c.n, opt);
    const std::vector<double> ref = reference_svd(a, c.m, c.n);
    INFO(c.m << " x " << c.n << " bound " << s.error_bound);
    CHECK(dev.calls == 1);
    CHECK(dev.m == std::max(c.m, c.n));  // a wide matrix goes over transposed
    CHECK(dev.n == std::min(c.m, c.n));
    CHECK_FALSE(dev.want_vectors);
    CHECK(s.gram_precision == "f64");
    CHECK_FALSE(s.fell_back);
    CHECK(max_rel_diff(s.sigma, ref) <= 1e-6);
    CHECK(s.error_bound <= 1e-6);
    CHECK(s.error_bound > 0);
    // The float64 model: eps64 sqrt(K) trace(G), trace = ||A||_F^2 = sum sigma^2.
    double fro2 = 0;
    for (double v : ref) fro2 += v * v;
    CHECK(
        s.gram_error_norm ==
        Approx(std::ldexp(1.0, -52) * std::sqrt(double(std::max(c.m, c.n))) * fro2).epsilon(1e-9));
  }
}

TEST_CASE("device low-rank estimate equals the CPU path's", "[cpu]") {
  DenseMatrix e;
  e.name = "random";
  e.n_rows = 512;
  e.n_cols = 64;
  e.data = random_matrix(512, 64, 99);
  // A dominant direction, so the 90% rank is small and well separated.
  for (int64_t r = 0; r < e.n_rows; ++r)
    for (int64_t c = 0; c < e.n_cols; ++c)
      e.data[static_cast<size_t>(r * 64 + c)] += static_cast<float>(c % 7) * 0.8f;
  SvdEmbedOptions cpu;
  cpu.spectrum.gram = GramPrecision::F64;
  cpu.low_rank_options.rank = 5;
  const SvdEmbedReport want = analyze_embedding(e, cpu);
  FakeDevice dev;
  SvdEmbedOptions on_device = cpu;
  on_device.device = wrap(dev);
  const SvdEmbedReport got = analyze_embedding(e, on_device);
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
  on_device.low_rank = false;
  (void)analyze_embedding(e, on_device);
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

TEST_CASE("a device that returns the wrong shape or a NaN is an error", "[cpu]") {
  const std::vector<float> a = random_matrix(50, 8, 1);
  GramEigenFn short_answer = [](const float*, int64_t, int64_t, bool) {
    GramEigenResult r;
    r.lambda = {1, 2, 3};
    return r;
  };
  CHECK_THROWS_WITH(singular_values_on(short_answer, a.data(), 50, 8, SpectrumOptions{}),
                    Catch::Contains("3 eigenvalues"));
  GramEigenFn nan_answer = [](const float*, int64_t, int64_t n, bool) {
    GramEigenResult r;
    r.lambda.assign(static_cast<size_t>(n), 1.0);
    r.lambda[0] = std::nan("");
    return r;
  };
  CHECK_THROWS_AS(singular_values_on(nan_answer, a.data(), 50, 8, SpectrumOptions{}), Error);
  std::vector<float> bad = a;
  bad[17] = std::nanf("");
  FakeDevice dev;
  CHECK_THROWS_WITH(singular_values_on(wrap(dev), bad.data(), 50, 8, SpectrumOptions{}),
                    Catch::Contains("entry (2, 1)"));
  CHECK(dev.calls == 0);  // refused before the device is asked
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
