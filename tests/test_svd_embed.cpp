// diag/gram_eigen, diag/svd_embed, diag/embedding_norms (through the CPU backend's gram_eigen).
//   - singular values against LAPACK dgesdd on the same matrix in float64 (an independent SVD,
//     no Gram matrix): tall, wide, and an ill-conditioned one that must fall back to float64;
//   - energy ranks, effective/stable rank and condition number on matrices whose singular
//     values are known by construction (scaled, permuted, sign-flipped identity blocks);
//   - norm statistics on embeddings whose row norms are chosen;
//   - the low-rank estimate on an exactly rank-2 matrix.

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "backend/cpu/cpu_fast_backend.h"
#include "core/error.h"
#include "diag/embedding_norms.h"
#include "diag/gram_eigen.h"
#include "diag/svd_embed.h"
#include "quant/quantize.h"
#include "support/svd_reference.h"

using namespace llmctl;
using llmctl::test::ill_conditioned_matrix;
using llmctl::test::known_spectrum;
using llmctl::test::max_rel_diff;
using llmctl::test::random_matrix;
using llmctl::test::reference_svd;

namespace {
cpu::CpuFastBackend& cpu2() {  // the CPU backend with 2 BLAS threads
  static cpu::CpuFastBackend b(2);
  return b;
}
}  // namespace

TEST_CASE("singular values match a float64 SVD (dgesdd) within 1e-6 sigma_max", "[cpu]") {
  // expect: the Gram precision the choice must land on, or "" for either. 700 x 96 sits at
  // the tolerance's edge: its float32 bound is 4.97e-7 (of 5e-7) with OpenBLAS's Haswell
  // kernels and above it with the SkylakeX/Cooperlake ones, so Auto rightly goes either way
  // there; the accuracy checks hold for both.
  struct Case {
    int m, n;
    GramPrecision gram;
    const char* expect;
  };
  for (const Case c : {Case{700, 96, GramPrecision::Auto, ""},
                       Case{700, 96, GramPrecision::F64, "f64"},
                       Case{48, 200, GramPrecision::Auto, "f32"},
                       Case{3000, 64, GramPrecision::Auto, "f32"}}) {
    const std::vector<float> a = random_matrix(c.m, c.n, 7 + static_cast<uint64_t>(c.m));
    SpectrumOptions opt;
    opt.gram = c.gram;
    const Spectrum s = singular_values(cpu2(), a.data(), c.m, c.n, opt);
    const std::vector<double> ref = reference_svd(a, c.m, c.n);
    INFO(c.m << " x " << c.n << " gram " << s.gram_precision << " bound " << s.error_bound);
    CHECK(s.sigma.size() == ref.size());
    CHECK(max_rel_diff(s.sigma, ref) <= 1e-6);
    CHECK(s.error_bound <= 1e-6);
    if (*c.expect != '\0') CHECK(s.gram_precision == c.expect);
  }
}

TEST_CASE("an ill-conditioned matrix falls back to the float64 Gram and stays accurate", "[cpu]") {
  // A = U diag(sigma) V^T with sigma from 1 down to 1e-6 (support/svd_reference.h): the
  // float32 Gram cannot resolve the small values, the float64 one can.
  const int m = 400, n = 40;
  const std::vector<float> af = ill_conditioned_matrix(m, n, 6.0, 3);
  SpectrumOptions opt;
  const Spectrum s = singular_values(cpu2(), af.data(), m, n, opt);
  const std::vector<double> ref = reference_svd(af, m, n);  // of the float32 values actually used
  INFO("bound " << s.error_bound << " gram error " << s.gram_error_norm);
  CHECK(s.fell_back);
  CHECK(s.gram_precision == "f64");
  CHECK(max_rel_diff(s.sigma, ref) <= 1e-6);
  CHECK(ref.back() < 1e-5 * ref.front());  // the case is really ill-conditioned
}

TEST_CASE("spectrum summary: energy ranks and ranks on a known spectrum", "[cpu]") {
  // sigma^2 = 50, 30, 10, 5, 4, 1 (sum 100): cumulative .5 .8 .9 .95 .99 1.
  std::vector<float> sigma;
  for (double v : {50.0, 30.0, 10.0, 5.0, 4.0, 1.0})
    sigma.push_back(static_cast<float>(std::sqrt(v)));
  const DenseMatrix e = known_spectrum(64, 6, sigma, 5);
  SvdEmbedOptions opt;
  opt.low_rank = false;
  const SvdEmbedReport r = analyze_embedding(cpu2(), e, opt);
  REQUIRE(r.spectrum.sigma.size() == 6);
  for (size_t i = 0; i < 6; ++i)  // the exact singular values, within the 1e-6 sigma_max target
    CHECK(std::fabs(r.spectrum.sigma[i] - static_cast<double>(sigma[i])) <=
          1e-6 * static_cast<double>(sigma[0]));
  CHECK(r.summary.rank90 == 3);
  CHECK(r.summary.rank99 == 5);
  CHECK(r.summary.rank999 == 6);
  CHECK(r.summary.cumulative[1] == Approx(0.8).epsilon(1e-6));
  CHECK(r.summary.condition_number == Approx(std::sqrt(50.0)).epsilon(1e-6));
  CHECK(r.summary.stable_rank == Approx(2.0).epsilon(1e-6));  // 100 / 50
  // Equal singular values: effective rank = k exactly.
  const DenseMatrix flat = known_spectrum(30, 8, std::vector<float>(8, 2.0f), 9);
  const SvdEmbedReport f = analyze_embedding(cpu2(), flat, opt);
  CHECK(f.summary.effective_rank == Approx(8.0).epsilon(1e-9));
  CHECK(f.summary.rank90 == 8);  // 7/8 = 0.875 < 0.9
  // A zero singular value: condition number is infinite.
  const DenseMatrix singular = known_spectrum(10, 3, {3.0f, 1.0f, 0.0f}, 2);
  CHECK(std::isinf(analyze_embedding(cpu2(), singular, opt).summary.condition_number));
}

TEST_CASE("norm statistics against token id on constructed embeddings", "[cpu]") {
  auto embedding = [](const std::vector<double>& norms) {
    DenseMatrix e;
    e.n_rows = static_cast<int64_t>(norms.size());
    e.n_cols = 4;
    e.data.assign(norms.size() * 4, 0.0f);
    for (size_t t = 0; t < norms.size(); ++t) {  // norm split over two coordinates: (3/5, 4/5) n
      e.data[t * 4 + t % 3] = static_cast<float>(0.6 * norms[t]);
      e.data[t * 4 + 3] = static_cast<float>(0.8 * norms[t]);
    }
    return e;
  };
  std::vector<double> grow(101);
  for (size_t t = 0; t < grow.size(); ++t) grow[t] = 1.0 + static_cast<double>(t);
  const std::vector<double> n1 = row_norms(embedding(grow));
  for (size_t t = 0; t < grow.size(); ++t) CHECK(n1[t] == Approx(grow[t]).epsilon(1e-6));
  const NormStats g = norm_statistics(n1);
  CHECK(g.trend == "grows");
  CHECK(g.spearman == Approx(1.0));
  CHECK(g.pearson == Approx(1.0));
  CHECK(g.slope_per_1k == Approx(1000.0).epsilon(1e-5));
  CHECK(g.mean == Approx(51.0).epsilon(1e-6));
  REQUIRE(g.deciles.size() == 11);
  for (int d = 0; d <= 10; ++d)
    CHECK(g.deciles[static_cast<size_t>(d)] == Approx(1.0 + 10.0 * d).epsilon(1e-6));
  CHECK(g.argmin == 0);
  CHECK(g.argmax == 100);
  REQUIRE(g.id_decile_means.size() == 10);
  CHECK(g.id_decile_starts[1] == 10);  // 101 ids: [0,10) [10,20) ...
  CHECK(g.id_decile_means[0] == Approx(5.5));

  std::vector<double> shrink(grow.rbegin(), grow.rend());
  CHECK(norm_statistics(shrink).trend == "shrinks");
  // A V shape symmetric about the middle id: no monotone trend (rho = r = 0).
  std::vector<double> vee(101);
  for (size_t t = 0; t < vee.size(); ++t) vee[t] = 1.0 + std::fabs(static_cast<double>(t) - 50.0);
  const NormStats v = norm_statistics(vee);
  CHECK(v.trend == "flat");
  CHECK(std::fabs(v.spearman) < 1e-12);
  CHECK(std::fabs(v.pearson) < 1e-12);
  // Ties share ranks: a constant vector has no correlation at all.
  CHECK(norm_statistics(std::vector<double>(20, 2.0)).spearman == 0.0);

  CHECK(percentile_of(grow, 1.0) == Approx(100.0 / 101));
  CHECK(percentile_of(grow, 101.0) == Approx(100.0));
  CHECK(percentile_of(grow, 0.5) == 0.0);
  CHECK_THROWS_AS(norm_statistics({}), Error);
}

TEST_CASE("low-rank estimate on an exactly rank-2 matrix", "[cpu]") {
  const int m = 256, n = 64;
  std::mt19937_64 rng(4);
  std::normal_distribution<double> normal;
  std::vector<double> u1(m), u2(m), v1(n), v2(n);
  for (auto* vec : {&u1, &u2, &v1, &v2})
    for (double& x : *vec) x = normal(rng);
  DenseMatrix e;
  e.name = "rank2";
  e.n_rows = m;
  e.n_cols = n;
  for (int r = 0; r < m; ++r)
    for (int c = 0; c < n; ++c)
      e.data.push_back(
          static_cast<float>(3 * u1[static_cast<size_t>(r)] * v1[static_cast<size_t>(c)] +
                             u2[static_cast<size_t>(r)] * v2[static_cast<size_t>(c)]));
  SvdEmbedOptions opt;
  opt.spectrum.gram = GramPrecision::F64;
  opt.low_rank_options.rank = 2;
  opt.low_rank_options.residual_type = GgmlType::Q4_0;
  const SvdEmbedReport r = analyze_embedding(cpu2(), e, opt);
  const LowRankEstimate& lr = r.low_rank;
  REQUIRE(lr.done);
  CHECK(r.summary.rank999 <= 2);
  CHECK(lr.truncation_error < 1e-6);      // nothing beyond rank 2 (float32 rounding only)
  CHECK(lr.reconstruction_error < 2e-3);  // F16 factors; the residual then fixes most of it
  CHECK(lr.direct_error > 10 * lr.reconstruction_error);  // Q4_0 alone is much worse
  CHECK(lr.rows_measured == m);
  // Bytes: two F16 factors (2 bytes x r x (m + n)) + the residual in Q4_0 (18 bytes per 32).
  CHECK(lr.bytes == Approx(2.0 * 2 * (m + n) + static_cast<double>(m) * n / 32 * 18));
  CHECK(lr.bits_per_weight_direct == Approx(4.5));
  CHECK(static_cast<double>(quantized_size(GgmlType::Q4_0, n)) == Approx(n / 32 * 18.0));
}

TEST_CASE("bad inputs are reported", "[cpu]") {
  std::vector<float> a = {1, 2, std::nanf(""), 4};
  CHECK_THROWS_AS(singular_values(cpu2(), a.data(), 2, 2, SpectrumOptions{}), Error);
  CHECK_THROWS_AS(singular_values(cpu2(), a.data(), 0, 2, SpectrumOptions{}), Error);
  const std::vector<uint8_t> bytes(64, 0);
  CHECK_THROWS_AS(dequantize_matrix("x", GgmlType::Q4_0, 48, 1, bytes.data()), Error);  // 48 % 32
  const DenseMatrix zero = known_spectrum(4, 2, {0.0f, 0.0f}, 1);
  CHECK_THROWS_AS(analyze_embedding(cpu2(), zero, SvdEmbedOptions{}), Error);
}
