// Embedding matrices as dense float32 and their per-token norm statistics (embedding_norms.h).

#include "diag/embedding_norms.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "io/gguf.h"
#include "quant/dequant.h"

namespace llmctl {

DenseMatrix dequantize_matrix(const std::string& name, GgmlType type, int64_t n_cols,
                              int64_t n_rows, const void* data) {
  if (!can_dequantize(type))
    throw Error(
        fmt::format("tensor '{}': cannot read type {} (expected F32, F16, BF16, Q8_0, Q4_0, "
                    "Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS or "
                    "MXFP4)",
                    name, ggml_type_name(type)));
  const GgmlTypeTraits tr = ggml_traits(type);
  if (n_cols <= 0 || n_rows <= 0 || n_cols % tr.block_size != 0)
    throw Error(fmt::format(
        "tensor '{}': expected a 2-D {} matrix with rows a multiple of {}, got [{}, {}]", name,
        tr.name, tr.block_size, n_cols, n_rows));
  DenseMatrix m;
  m.name = name;
  m.type = type;
  m.n_rows = n_rows;
  m.n_cols = n_cols;
  m.data.resize(static_cast<size_t>(n_rows * n_cols));
  const size_t row_bytes = static_cast<size_t>(n_cols / tr.block_size) * tr.type_size;
  const auto* src = static_cast<const uint8_t*>(data);
  for (int64_t r = 0; r < n_rows; ++r)
    dequantize_row(type, src + static_cast<size_t>(r) * row_bytes, m.data.data() + r * n_cols,
                   n_cols);
  return m;
}

namespace {

double l2(const float* row, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(row[i]) * static_cast<double>(row[i]);
  return std::sqrt(s);
}

}  // namespace

std::vector<double> row_norms(const DenseMatrix& m) {
  std::vector<double> norms(static_cast<size_t>(m.n_rows));
  for (int64_t r = 0; r < m.n_rows; ++r)
    norms[static_cast<size_t>(r)] = l2(m.data.data() + r * m.n_cols, m.n_cols);
  return norms;
}

const GgufTensorInfo& require_matrix(const GgufFile& f, const std::string& name,
                                     const std::string& hint) {
  const GgufTensorInfo* t = f.find_tensor(name);
  if (!t)
    throw FileError(
        f.path(), fmt::format("no tensor '{}' ({} tensors in the file)", name, f.tensors().size()),
        FileError::kNoOffset, hint);
  if (t->shape.size() != 2)
    throw FileError(
        f.path(), fmt::format("tensor '{}': expected 2 dimensions [n_embd, n_vocab], got {}", name,
                              t->shape.size()));
  return *t;
}

DenseMatrix dequantize_matrix(const GgufTensorInfo& t) {
  return dequantize_matrix(t.name, t.type, t.shape.at(0), t.shape.at(1), t.data);
}

std::vector<double> row_norms(const GgufTensorInfo& t) {
  // One row at a time through the same checks as dequantize_matrix (a 1-row matrix).
  const int64_t n_cols = t.shape.at(0), n_rows = t.shape.at(1);
  const GgmlTypeTraits tr = ggml_traits(t.type);
  std::vector<double> norms;
  if (n_rows <= 0) return norms;
  const size_t row_bytes =
      n_cols > 0 ? static_cast<size_t>(n_cols / tr.block_size) * tr.type_size : 0;
  for (int64_t r = 0; r < n_rows; ++r) {
    const DenseMatrix row =
        dequantize_matrix(t.name, t.type, n_cols, 1, t.data + static_cast<size_t>(r) * row_bytes);
    norms.push_back(l2(row.data.data(), n_cols));
  }
  return norms;
}

namespace {

// Quantile q in [0, 1] of sorted values, linear interpolation between order statistics
// (numpy's default "linear" method).
double quantile_sorted(const std::vector<double>& sorted, double q) {
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (pos - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

double pearson(const std::vector<double>& x, const std::vector<double>& y) {
  const double n = static_cast<double>(x.size());
  const double mx = std::accumulate(x.begin(), x.end(), 0.0) / n;
  const double my = std::accumulate(y.begin(), y.end(), 0.0) / n;
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
  }
  return (sxx > 0 && syy > 0) ? sxy / std::sqrt(sxx * syy) : 0.0;
}

// Ranks 1..n, ties sharing their average rank.
std::vector<double> ranks(const std::vector<double>& v) {
  std::vector<size_t> order(v.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    const double avg = (static_cast<double>(i) + static_cast<double>(j)) / 2 + 1;
    for (size_t k = i; k <= j; ++k) r[order[k]] = avg;
    i = j + 1;
  }
  return r;
}

}  // namespace

NormStats norm_statistics(const std::vector<double>& norms) {
  if (norms.empty()) throw Error("norm statistics of an empty vocabulary");
  NormStats s;
  const size_t n = norms.size();
  s.n = static_cast<int64_t>(n);
  s.mean = std::accumulate(norms.begin(), norms.end(), 0.0) / static_cast<double>(n);
  double ss = 0;
  for (double v : norms) ss += (v - s.mean) * (v - s.mean);
  s.sd = n > 1 ? std::sqrt(ss / static_cast<double>(n - 1)) : 0.0;
  const auto [mn, mx] = std::minmax_element(norms.begin(), norms.end());
  s.min = *mn;
  s.max = *mx;
  s.argmin = mn - norms.begin();
  s.argmax = mx - norms.begin();
  std::vector<double> sorted = norms;
  std::sort(sorted.begin(), sorted.end());
  for (int d = 0; d <= 10; ++d) s.deciles.push_back(quantile_sorted(sorted, d / 10.0));
  const size_t buckets = std::min<size_t>(10, n);
  for (size_t b = 0; b < buckets; ++b) {
    const size_t lo = b * n / buckets, hi = (b + 1) * n / buckets;
    s.id_decile_starts.push_back(static_cast<int64_t>(lo));
    s.id_decile_means.push_back(std::accumulate(norms.begin() + static_cast<std::ptrdiff_t>(lo),
                                                norms.begin() + static_cast<std::ptrdiff_t>(hi),
                                                0.0) /
                                static_cast<double>(hi - lo));
  }
  std::vector<double> ids(n);
  std::iota(ids.begin(), ids.end(), 0.0);
  s.pearson = pearson(ids, norms);
  s.spearman = pearson(ranks(ids), ranks(norms));
  // Slope = r * sd_y / sd_x.
  const double sd_ids = std::sqrt(static_cast<double>(n) * static_cast<double>(n + 1) / 12.0);
  s.slope_per_1k = n > 1 ? s.pearson * s.sd / sd_ids * 1000.0 : 0.0;
  s.trend = s.spearman >= kTrendThreshold    ? "grows"
            : s.spearman <= -kTrendThreshold ? "shrinks"
                                             : "flat";
  return s;
}

double percentile_of(const std::vector<double>& values, double v) {
  if (values.empty()) return 0;
  const auto le = std::count_if(values.begin(), values.end(), [v](double x) { return x <= v; });
  return 100.0 * static_cast<double>(le) / static_cast<double>(values.size());
}

}  // namespace llmctl
