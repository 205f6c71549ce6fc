#pragma once
// Independent references for the svd-embed spectrum tests (tests/test_svd_embed*.cpp and
// tests/gpu/test_gpu_svd_embed.cpp, test_gpu_gram_eigen.cpp): LAPACK dgesdd singular values in
// float64 (a direct SVD, no Gram matrix), the Gram matrix by definition and an eigenvector
// check, and test matrices (Gaussian, known spectrum, ill-conditioned). Header-only so
// the GPU test executable can use it without another support library.

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "diag/embedding_norms.h"

extern "C" void dgesdd_(const char* jobz, const int* m, const int* n, double* a, const int* lda,
                        double* s, double* u, const int* ldu, double* vt, const int* ldvt,
                        double* work, const int* lwork, int* iwork, int* info);

namespace llmctl::test {

// Singular values of A (m, n) row-major by LAPACK dgesdd in float64, descending.
inline std::vector<double> reference_svd(const std::vector<float>& a, int m, int n) {
  std::vector<double> col(static_cast<size_t>(m) * static_cast<size_t>(n));  // column-major copy
  for (int r = 0; r < m; ++r)
    for (int c = 0; c < n; ++c)
      col[static_cast<size_t>(c) * static_cast<size_t>(m) + static_cast<size_t>(r)] =
          a[static_cast<size_t>(r) * static_cast<size_t>(n) + static_cast<size_t>(c)];
  const int k = std::min(m, n);
  std::vector<double> s(static_cast<size_t>(k));
  std::vector<int> iwork(static_cast<size_t>(8 * k));
  int lwork = -1, info = 0, one = 1;
  double q = 0, dummy = 0;
  dgesdd_("N", &m, &n, col.data(), &m, s.data(), &dummy, &one, &dummy, &one, &q, &lwork,
          iwork.data(), &info);
  lwork = static_cast<int>(q);
  std::vector<double> work(static_cast<size_t>(lwork));
  dgesdd_("N", &m, &n, col.data(), &m, s.data(), &dummy, &one, &dummy, &one, work.data(), &lwork,
          iwork.data(), &info);
  REQUIRE(info == 0);
  return s;
}

// Standard normal entries rounded to float32.
inline std::vector<float> random_matrix(int m, int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::vector<float> a(static_cast<size_t>(m) * static_cast<size_t>(n));
  for (float& v : a) v = static_cast<float>(normal(rng));
  return a;
}

// max_i |x_i - y_i| / y_0 (y descending: relative to sigma_max).
inline double max_rel_diff(const std::vector<double>& x, const std::vector<double>& y) {
  REQUIRE(x.size() == y.size());
  double d = 0;
  for (size_t i = 0; i < x.size(); ++i) d = std::max(d, std::fabs(x[i] - y[i]));
  return d / y.front();
}

// An (m, n) matrix with singular values exactly `sigma` (float32-representable): row p(i) holds
// +-sigma_i in column q(i) for permutations p, q, every other entry 0.
inline DenseMatrix known_spectrum(int m, int n, const std::vector<float>& sigma, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int> rows(static_cast<size_t>(m)), cols(static_cast<size_t>(n));
  std::iota(rows.begin(), rows.end(), 0);
  std::iota(cols.begin(), cols.end(), 0);
  std::shuffle(rows.begin(), rows.end(), rng);
  std::shuffle(cols.begin(), cols.end(), rng);
  DenseMatrix e;
  e.name = "test";
  e.n_rows = m;
  e.n_cols = n;
  e.data.assign(static_cast<size_t>(m) * static_cast<size_t>(n), 0.0f);
  for (size_t i = 0; i < sigma.size(); ++i)
    e.data[static_cast<size_t>(rows[i]) * static_cast<size_t>(n) + static_cast<size_t>(cols[i])] =
        (i % 2 ? -1.0f : 1.0f) * sigma[i];
  return e;
}

// A = U diag(sigma) V^T (m, n), m >= n, sigma from 1 down to 10^-decades (log-spaced), U and V
// two Householder reflections each (H = I - 2 w w^T / w^T w) applied to known_spectrum, in
// float64, then rounded to float32 (compare against dgesdd of these float32 values).
inline std::vector<float> ill_conditioned_matrix(int m, int n, double decades, uint64_t seed) {
  std::vector<float> sigma;
  for (int i = 0; i < n; ++i)
    sigma.push_back(static_cast<float>(std::pow(10.0, -decades * i / (n - 1))));
  const DenseMatrix e = known_spectrum(m, n, sigma, seed);
  std::mt19937_64 rng(seed + 8);
  std::normal_distribution<double> normal;
  std::vector<double> a(e.data.begin(), e.data.end());
  auto at = [&](int r, int c) -> double& {
    return a[static_cast<size_t>(r) * static_cast<size_t>(n) + static_cast<size_t>(c)];
  };
  for (int rep = 0; rep < 2; ++rep) {
    std::vector<double> w(static_cast<size_t>(n));
    for (double& x : w) x = normal(rng);
    const double ww = std::inner_product(w.begin(), w.end(), w.begin(), 0.0);
    for (int r = 0; r < m; ++r) {  // right: A H
      double d = 0;
      for (int c = 0; c < n; ++c) d += at(r, c) * w[static_cast<size_t>(c)];
      for (int c = 0; c < n; ++c) at(r, c) -= 2 * d / ww * w[static_cast<size_t>(c)];
    }
    std::vector<double> u(static_cast<size_t>(m));
    for (double& x : u) x = normal(rng);
    const double uu = std::inner_product(u.begin(), u.end(), u.begin(), 0.0);
    for (int c = 0; c < n; ++c) {  // left: H A
      double d = 0;
      for (int r = 0; r < m; ++r) d += at(r, c) * u[static_cast<size_t>(r)];
      for (int r = 0; r < m; ++r) at(r, c) -= 2 * d / uu * u[static_cast<size_t>(r)];
    }
  }
  return std::vector<float>(a.begin(), a.end());
}

// A test matrix of a spectrum test: m x n Gaussian (seed seed_base + m), or with `ill` the
// ill-conditioned one (ill_conditioned_matrix, sigma over 6 decades).
struct MatrixCase {
  int m, n;
  bool ill;
};
inline std::vector<float> case_matrix(const MatrixCase& c, uint64_t seed_base) {
  return c.ill ? ill_conditioned_matrix(c.m, c.n, 6.0, 3)
               : random_matrix(c.m, c.n, seed_base + static_cast<uint64_t>(c.m));
}

// G = A^T A (n, n) column-major (both triangles) of A (m, n) row-major, by definition in
// float64: the plain reference for a Gram eigen-decomposition.
inline std::vector<double> naive_gram(const std::vector<float>& a, int m, int n) {
  std::vector<double> g(static_cast<size_t>(n) * static_cast<size_t>(n), 0.0);
  for (int r = 0; r < m; ++r)
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j)
        g[static_cast<size_t>(j) * static_cast<size_t>(n) + static_cast<size_t>(i)] +=
            static_cast<double>(
                a[static_cast<size_t>(r) * static_cast<size_t>(n) + static_cast<size_t>(i)]) *
            static_cast<double>(
                a[static_cast<size_t>(r) * static_cast<size_t>(n) + static_cast<size_t>(j)]);
  return g;
}

// How far `vectors` (n, n) column-major, column c for lambda[c], are from eigenvectors of the
// symmetric `gram` (n, n): the largest ||G v - lambda v|| / lambda_max, | ||v|| - 1 | and
// |v_c . v_(c-1)| over the columns.
struct EigenErrors {
  double residual = 0, norm = 0, neighbour_dot = 0;
};
inline EigenErrors eigen_errors(const std::vector<double>& gram, const std::vector<double>& lambda,
                                const std::vector<double>& vectors, int n) {
  REQUIRE(lambda.size() == static_cast<size_t>(n));
  REQUIRE(vectors.size() == static_cast<size_t>(n) * static_cast<size_t>(n));
  const double lmax = lambda.back();
  EigenErrors e;
  for (int c = 0; c < n; ++c) {
    const double* v = vectors.data() + static_cast<size_t>(c) * static_cast<size_t>(n);
    double res = 0, nrm = 0, dot = 0;
    for (int i = 0; i < n; ++i) {
      double gv = 0;
      for (int j = 0; j < n; ++j)
        gv += gram[static_cast<size_t>(j) * static_cast<size_t>(n) + static_cast<size_t>(i)] * v[j];
      const double d = gv - lambda[static_cast<size_t>(c)] * v[i];
      res += d * d;
      nrm += v[i] * v[i];
      if (c > 0) dot += v[i] * v[i - n];
    }
    e.residual = std::max(e.residual, std::sqrt(res) / lmax);
    e.norm = std::max(e.norm, std::fabs(std::sqrt(nrm) - 1));
    e.neighbour_dot = std::max(e.neighbour_dot, std::fabs(dot));
  }
  return e;
}

}  // namespace llmctl::test
