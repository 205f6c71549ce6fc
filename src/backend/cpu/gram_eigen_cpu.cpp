// The CPU's Gram eigen-decomposition; see gram_eigen_cpu.h (and diag/gram_eigen.h for the
// accuracy argument).
//
// BLAS/LAPACK are called through their Fortran symbols (column-major, 32-bit integers, every
// argument by pointer): Debian's OpenBLAS ships cblas.h but no lapacke.h, and the Fortran
// interface is the one every LAPACK provides. A row-major A (m, n) is, read column-major, the
// matrix B = A^T (n, m) with leading dimension n, so
//   syrk('L', 'N', N=n, K=m, B) -> B B^T = A^T A (n, n)   (m >= n)
//   syrk('L', 'T', N=m, K=n, B) -> B^T B = A A^T (m, m)   (m <  n)
// and only the lower triangle (column-major) is written and read.

#include "backend/cpu/gram_eigen_cpu.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/gram_error.h"
#include "core/stop_point.h"

extern "C" {
void ssyrk_(const char* uplo, const char* trans, const int* n, const int* k, const float* alpha,
            const float* a, const int* lda, const float* beta, float* c, const int* ldc);
void dsyrk_(const char* uplo, const char* trans, const int* n, const int* k, const double* alpha,
            const double* a, const int* lda, const double* beta, double* c, const int* ldc);
void dsymv_(const char* uplo, const int* n, const double* alpha, const double* a, const int* lda,
            const double* x, const int* incx, const double* beta, double* y, const int* incy);
void dsyev_2stage_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda,
                   double* w, double* work, const int* lwork, int* info);
void dsyevr_(const char* jobz, const char* range, const char* uplo, const int* n, double* a,
             const int* lda, const double* vl, const double* vu, const int* il, const int* iu,
             const double* abstol, int* m, double* w, double* z, const int* ldz, int* isuppz,
             double* work, const int* lwork, int* iwork, const int* liwork, int* info);
// OpenBLAS only; weak so that another BLAS links too (the call is then skipped).
void openblas_set_num_threads(int n) __attribute__((weak));
}

namespace llmctl::cpu {
namespace {

constexpr int64_t kGramBlock = 2048;  // products summed in float32 before a float64 add

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int to_int(int64_t v, const char* what) {
  if (v < 0 || v > std::numeric_limits<int>::max())
    throw Error(fmt::format("{} = {} does not fit LAPACK's 32-bit integers", what, v));
  return static_cast<int>(v);
}

// The shape of G = A^T A (dim = n, summed over K = m rows) or A A^T (dim = m, K = n).
struct GramShape {
  int64_t m, n;
  bool wide;  // m < n: G = A A^T
  int64_t dim() const { return wide ? m : n; }
  int64_t k() const { return wide ? n : m; }
};

// B's K-slice [k0, k0 + len): rows k0.. of A (m >= n), or columns k0.. of A (wide).
const float* slice(const float* a, const GramShape& s, int64_t k0) {
  return s.wide ? a + k0 : a + k0 * s.n;
}

std::vector<double> gram_f32(const float* a, const GramShape& s) {
  const int dim = to_int(s.dim(), "Gram size"), lda = to_int(s.n, "row length");
  const char* trans = s.wide ? "T" : "N";
  const float one = 1.0f, zero = 0.0f;
  const size_t nn = static_cast<size_t>(dim) * static_cast<size_t>(dim);
  std::vector<double> g(nn, 0.0);
  std::vector<float> part(nn);
  for (int64_t k0 = 0; k0 < s.k(); k0 += kGramBlock) {
    stop_point();  // Ctrl-C between blocks
    const int len = to_int(std::min(kGramBlock, s.k() - k0), "block");
    ssyrk_("L", trans, &dim, &len, &one, slice(a, s, k0), &lda, &zero, part.data(), &dim);
    for (int64_t j = 0; j < dim; ++j) {  // lower triangle, column j from row j
      const size_t c = static_cast<size_t>(j) * static_cast<size_t>(dim);
      for (size_t i = c + static_cast<size_t>(j); i < c + static_cast<size_t>(dim); ++i)
        g[i] += static_cast<double>(part[i]);
    }
  }
  return g;
}

std::vector<double> gram_f64(const float* a, const GramShape& s) {
  const int dim = to_int(s.dim(), "Gram size"), lda = to_int(s.n, "row length");
  const double one = 1.0;
  const size_t nn = static_cast<size_t>(dim) * static_cast<size_t>(dim);
  std::vector<double> g(nn, 0.0);
  // Widen one K-slice at a time (rows of A, or for a wide A its column block copied out
  // with leading dimension n kept) so the float64 copy stays small.
  std::vector<double> buf;
  for (int64_t k0 = 0; k0 < s.k(); k0 += kGramBlock) {
    stop_point();
    const int64_t len = std::min(kGramBlock, s.k() - k0);
    const int ilen = to_int(len, "block");
    if (!s.wide) {
      buf.assign(a + k0 * s.n, a + (k0 + len) * s.n);
      dsyrk_("L", "N", &dim, &ilen, &one, buf.data(), &lda, &one, g.data(), &dim);
    } else {
      // Columns k0..k0+len of every row: (len, m) column-major with leading dimension len.
      buf.resize(static_cast<size_t>(len * s.m));
      for (int64_t r = 0; r < s.m; ++r)
        for (int64_t c = 0; c < len; ++c)
          buf[static_cast<size_t>(r * len + c)] = static_cast<double>(a[r * s.n + k0 + c]);
      dsyrk_("L", "T", &dim, &ilen, &one, buf.data(), &ilen, &one, g.data(), &dim);
    }
  }
  return g;
}

// sum_i a[i] * x[i] in float64 with 8 independent partial sums, so the compiler can keep
// them in vector registers (a single running sum is one long dependency chain).
double dot_f32_f64(const float* a, const double* x, int64_t n) {
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) acc[k] += static_cast<double>(a[i + k]) * x[i + k];
  double dot = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) dot += static_cast<double>(a[i]) * x[i];
  return dot;
}

// Y (dim, b) = (exact G) X, evaluated in float64 straight from A: for m >= n, one pass
// y_j += (a_r . x_j) a_r over the rows r; for a wide A, u_j = sum_r x_rj a_r, then
// y_rj = a_r . u_j. Rows are split over threads, each with its own partial sums.
std::vector<double> apply_exact_gram(const float* a, const GramShape& s,
                                     const std::vector<double>& x, int b, int n_threads) {
  const int64_t n = s.n, dim = s.dim();
  const int nt =
      std::max(1, std::min<int>(n_threads, static_cast<int>(std::max<int64_t>(1, s.m / 256))));
  auto rows_of = [&](int t) {
    return std::pair<int64_t, int64_t>{s.m * t / nt, s.m * (t + 1) / nt};
  };
  auto run = [&](auto&& body) {
    std::vector<std::thread> pool;
    for (int t = 1; t < nt; ++t) pool.emplace_back(body, t);
    body(0);
    for (auto& th : pool) th.join();
  };
  std::vector<std::vector<double>> part(static_cast<size_t>(nt),
                                        std::vector<double>(static_cast<size_t>(n * b), 0.0));
  std::vector<double> y(static_cast<size_t>(dim * b), 0.0);
  if (!s.wide) {
    run([&](int t) {
      auto [r0, r1] = rows_of(t);
      std::vector<double>& acc = part[static_cast<size_t>(t)];
      for (int64_t r = r0; r < r1; ++r) {
        const float* row = a + r * n;
        for (int j = 0; j < b; ++j) {
          const double dot = dot_f32_f64(row, x.data() + j * n, n);
          double* aj = acc.data() + j * n;
          for (int64_t i = 0; i < n; ++i) aj[i] += dot * static_cast<double>(row[i]);
        }
      }
    });
    for (const auto& p : part)
      for (size_t i = 0; i < y.size(); ++i) y[i] += p[i];
    return y;
  }
  run([&](int t) {  // u_j (n,) = A^T x_j
    auto [r0, r1] = rows_of(t);
    std::vector<double>& acc = part[static_cast<size_t>(t)];
    for (int64_t r = r0; r < r1; ++r)
      for (int j = 0; j < b; ++j) {
        const double xr = x[static_cast<size_t>(j * dim + r)];
        double* uj = acc.data() + j * n;
        for (int64_t i = 0; i < n; ++i) uj[i] += xr * static_cast<double>(a[r * n + i]);
      }
  });
  std::vector<double> u(static_cast<size_t>(n * b), 0.0);
  for (const auto& p : part)
    for (size_t i = 0; i < u.size(); ++i) u[i] += p[i];
  run([&](int t) {  // y_rj = a_r . u_j
    auto [r0, r1] = rows_of(t);
    for (int64_t r = r0; r < r1; ++r)
      for (int j = 0; j < b; ++j) {
        y[static_cast<size_t>(j * dim + r)] = dot_f32_f64(a + r * n, u.data() + j * n, n);
      }
  });
  return y;
}

// Estimated ||G32 - A^T A||_2: power iteration on the difference (see gram_eigen.h).
double estimate_gram_error(const float* a, const GramShape& s, const std::vector<double>& g32,
                           int n_threads) {
  constexpr int kVectors = 2, kSteps = 3;
  constexpr double kSafety = 2.0;
  const int dim = to_int(s.dim(), "Gram size"), inc = 1;
  const double one = 1.0, zero = 0.0;
  std::mt19937_64 rng(0x5eed);
  std::normal_distribution<double> normal;
  std::vector<double> x(static_cast<size_t>(dim) * kVectors);
  for (double& v : x) v = normal(rng);
  double best = 0;
  for (int step = 0; step < kSteps; ++step) {
    for (int j = 0; j < kVectors; ++j) {  // normalize each x_j
      double* xj = x.data() + j * dim;
      double nrm = 0;
      for (int i = 0; i < dim; ++i) nrm += xj[i] * xj[i];
      nrm = std::sqrt(nrm);
      if (nrm == 0) nrm = 1;  // E x = 0 exactly: leave it, the ratio is 0
      for (int i = 0; i < dim; ++i) xj[i] /= nrm;
    }
    std::vector<double> y = apply_exact_gram(a, s, x, kVectors, n_threads);
    for (int j = 0; j < kVectors; ++j) {
      std::vector<double> gx(static_cast<size_t>(dim));
      dsymv_("L", &dim, &one, g32.data(), &dim, x.data() + j * dim, &inc, &zero, gx.data(), &inc);
      double nrm = 0;
      for (int i = 0; i < dim; ++i) {
        const double e = gx[static_cast<size_t>(i)] - y[static_cast<size_t>(j * dim + i)];
        x[static_cast<size_t>(j * dim + i)] = e;
        nrm += e * e;
      }
      best = std::max(best, std::sqrt(nrm));  // ||E x|| with ||x|| = 1
    }
  }
  return kSafety * best;
}

// Eigenvalues of the symmetric G (lower triangle), ascending. G is overwritten.
// LAPACK's two-stage reduction (dense -> band with BLAS3, band -> tridiagonal by bulge
// chasing, then dsterf): the one-stage dsytrd spends half its flops in BLAS2 calls that
// synchronize the BLAS threads thousands of times. Run on one BLAS thread: on a shared
// machine the threaded BLAS2 stalls badly (2048 x 2048 under load: 195 s with 2 threads,
// 13 s with one).
std::vector<double> eigenvalues(std::vector<double> g, int64_t n64, int n_threads) {
  const int n = to_int(n64, "Gram size");
  std::vector<double> w(static_cast<size_t>(n));
  int lwork = -1, info = 0;
  double work_query = 0;
  dsyev_2stage_("N", "L", &n, g.data(), &n, w.data(), &work_query, &lwork, &info);
  lwork = std::max(1, static_cast<int>(work_query));
  std::vector<double> work(static_cast<size_t>(lwork));
  set_blas_threads(1);
  dsyev_2stage_("N", "L", &n, g.data(), &n, w.data(), work.data(), &lwork, &info);
  set_blas_threads(n_threads);
  if (info != 0)
    throw Error(
        fmt::format("LAPACK dsyev_2stage failed (info = {}) on a {} x {} Gram matrix", info, n, n));
  return w;
}

// Every eigenvector of the symmetric G (n, n) (lower triangle read): (n, n) column-major in
// ascending eigenvalue order (dsyevr, all of them). G is overwritten.
std::vector<double> eigenvectors(std::vector<double> gram, int64_t n64) {
  const int n = to_int(n64, "Gram size");
  const int il = 1, iu = n;
  const double vl = 0, vu = 0, abstol = 0;
  int found = 0, info = 0, lwork = -1, liwork = -1, iwork_query = 0;
  double work_query = 0;
  std::vector<double> w(static_cast<size_t>(n)), z(static_cast<size_t>(n) * static_cast<size_t>(n));
  std::vector<int> isuppz(static_cast<size_t>(2 * n));
  dsyevr_("V", "A", "L", &n, gram.data(), &n, &vl, &vu, &il, &iu, &abstol, &found, w.data(),
          z.data(), &n, isuppz.data(), &work_query, &lwork, &iwork_query, &liwork, &info);
  lwork = static_cast<int>(work_query);
  liwork = std::max(1, iwork_query);
  std::vector<double> work(static_cast<size_t>(std::max(1, lwork)));
  std::vector<int> iwork(static_cast<size_t>(liwork));
  dsyevr_("V", "A", "L", &n, gram.data(), &n, &vl, &vu, &il, &iu, &abstol, &found, w.data(),
          z.data(), &n, isuppz.data(), work.data(), &lwork, iwork.data(), &liwork, &info);
  if (info != 0 || found != n)
    throw Error(fmt::format("LAPACK dsyevr failed (info = {}, {} of {} vectors)", info, found, n));
  return z;
}

// G formed from float64 products into `g`, its error model into out.gram_error_norm.
void form_gram_f64(const float* a, const GramShape& s, std::vector<double>& g, GramEigen& out) {
  const auto t0 = std::chrono::steady_clock::now();
  g = gram_f64(a, s);
  double trace = 0;
  for (int64_t i = 0; i < s.dim(); ++i) trace += g[static_cast<size_t>(i * s.dim() + i)];
  out.gram_error_norm = f64_gram_error(trace, s.k());
  out.seconds_gram += seconds_since(t0);
  out.gram_precision = "f64";
}

// The eigenvalues of g into out.lambda (g kept when the vectors follow).
void solve(std::vector<double>& g, const GramShape& s, bool keep, int n_threads, GramEigen& out) {
  const auto t0 = std::chrono::steady_clock::now();
  out.lambda =
      keep ? eigenvalues(g, s.dim(), n_threads) : eigenvalues(std::move(g), s.dim(), n_threads);
  out.seconds_eigen += seconds_since(t0);
}

// The eigenvectors of the final g, when asked.
void finish(std::vector<double>& g, const GramShape& s, bool want_vectors, GramEigen& out) {
  if (!want_vectors) return;
  const auto t0 = std::chrono::steady_clock::now();
  out.vectors = eigenvectors(std::move(g), s.dim());
  out.seconds_eigen += seconds_since(t0);
}

}  // namespace

void set_blas_threads(int n) {
  if (openblas_set_num_threads) openblas_set_num_threads(std::max(1, n));
}

GramEigen gram_eigen_f64(const float* a, int64_t m, int64_t n, bool want_vectors, int n_threads) {
  set_blas_threads(n_threads);
  const GramShape s{m, n, m < n};
  GramEigen out;
  std::vector<double> g;
  form_gram_f64(a, s, g, out);
  solve(g, s, want_vectors, n_threads, out);
  finish(g, s, want_vectors, out);
  return out;
}

GramEigen gram_eigen_checked(const float* a, int64_t m, int64_t n, double tolerance,
                             bool want_vectors, int n_threads) {
  set_blas_threads(n_threads);
  const GramShape s{m, n, m < n};
  GramEigen out;
  auto t0 = std::chrono::steady_clock::now();
  std::vector<double> g = gram_f32(a, s);
  out.seconds_gram += seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  out.gram_error_norm = estimate_gram_error(a, s, g, n_threads);
  out.seconds_check = seconds_since(t0);
  out.gram_precision = "f32";
  solve(g, s, want_vectors, n_threads, out);
  const double bound = spectrum_error_bound(out.lambda, out.gram_error_norm, s.dim());
  out.fell_back = !(bound <= tolerance / 2);
  if (out.fell_back) {
    form_gram_f64(a, s, g, out);
    solve(g, s, want_vectors, n_threads, out);
  }
  finish(g, s, want_vectors, out);
  return out;
}

}  // namespace llmctl::cpu
