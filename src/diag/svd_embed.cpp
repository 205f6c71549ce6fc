// svd-embed's analysis: spectrum summary and the whole report (svd_embed.h).

#include "diag/svd_embed.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"

namespace llmctl {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The smallest r (1-based) with cumulative[r - 1] >= p. The comparison allows a relative
// 1e-12 so that rounding in the running sum cannot push an exact 0.9 past its rank.
int64_t rank_at(const std::vector<double>& cumulative, double p) {
  for (size_t i = 0; i < cumulative.size(); ++i)
    if (cumulative[i] >= p * (1 - 1e-12)) return static_cast<int64_t>(i + 1);
  return static_cast<int64_t>(cumulative.size());
}

}  // namespace

SpectrumSummary summarize_spectrum(const std::vector<double>& sigma) {
  if (sigma.empty()) throw Error("empty spectrum");
  SpectrumSummary s;
  double total2 = 0, total1 = 0;
  for (double v : sigma) {
    total2 += v * v;
    total1 += v;
  }
  if (!(total2 > 0)) throw Error("the matrix is zero: every singular value is 0");
  double run = 0;
  for (double v : sigma) {
    s.energy.push_back(v * v / total2);
    run += v * v;
    s.cumulative.push_back(run / total2);
  }
  s.rank90 = rank_at(s.cumulative, 0.90);
  s.rank99 = rank_at(s.cumulative, 0.99);
  s.rank999 = rank_at(s.cumulative, 0.999);
  double entropy = 0;
  for (double v : sigma) {
    const double p = v / total1;
    if (p > 0) entropy -= p * std::log(p);
  }
  s.effective_rank = std::exp(entropy);
  s.stable_rank = total2 / (sigma.front() * sigma.front());
  s.condition_number =
      sigma.back() > 0 ? sigma.front() / sigma.back() : std::numeric_limits<double>::infinity();
  return s;
}

SvdEmbedReport analyze_embedding(Backend& backend, const DenseMatrix& e,
                                 const SvdEmbedOptions& opt) {
  const auto t_start = std::chrono::steady_clock::now();
  SvdEmbedReport r;
  r.tensor = e.name;
  r.type = e.type;
  r.n_rows = e.n_rows;
  r.n_cols = e.n_cols;

  // The low-rank estimate needs V_r, the top eigenvectors of A^T A: ask for them (only for a
  // tall matrix, where G = A^T A; a wide one has no low-rank saving anyway).
  SpectrumOptions so = opt.spectrum;
  const bool want_low_rank = opt.low_rank && e.n_rows >= e.n_cols;
  so.keep_vectors = want_low_rank;
  r.spectrum = singular_values(backend, e.data.data(), e.n_rows, e.n_cols, so);
  r.summary = summarize_spectrum(r.spectrum.sigma);

  auto t0 = std::chrono::steady_clock::now();
  r.norms = row_norms(e);
  r.norm_stats = norm_statistics(r.norms);
  r.seconds_norms = seconds_since(t0);

  if (want_low_rank) {
    t0 = std::chrono::steady_clock::now();
    const int64_t k = static_cast<int64_t>(r.spectrum.sigma.size());
    const int64_t rank =
        opt.low_rank_options.rank > 0 ? opt.low_rank_options.rank : r.summary.rank90;
    if (rank > k)
      throw Error(fmt::format("--rank {} exceeds the matrix rank bound min(n_vocab, n_embd) = {}",
                              rank, k));
    std::vector<double> v = top_columns(r.spectrum.eigenvectors, r.spectrum.gram_n, rank);
    r.spectrum.eigenvectors.clear();
    r.low_rank = estimate_low_rank(e, r.spectrum.sigma, v, rank, opt.low_rank_options);
    r.seconds_low_rank = seconds_since(t0);
  } else {
    r.low_rank.skipped =
        opt.low_rank ? "n_vocab < n_embd: a rank-r factorization saves nothing" : "not requested";
  }
  r.seconds_total = seconds_since(t_start);
  return r;
}

}  // namespace llmctl
