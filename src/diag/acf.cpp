// Autocorrelation and loop detection of generated tokens (acf.h).
#include "diag/acf.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

namespace llmctl {

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
}  // namespace

// Cohen's kappa per lag. The chance agreement p_e = sum_v a_v b_v / N^2 over the slices
// A = ids[0 .. n-k) and B = ids[k .. n) is updated as k grows (A loses its last id, B its
// first), so all lags cost O(n) for p_e plus O(n - k) each for the matches.
std::vector<double> token_acf(const std::vector<int32_t>& ids, int64_t max_lag) {
  const auto n = static_cast<int64_t>(ids.size());
  std::vector<double> acf(static_cast<size_t>(std::max<int64_t>(max_lag, 0) + 1), kNaN);
  if (acf.empty()) return acf;
  acf[0] = 1.0;
  std::unordered_map<int32_t, int64_t> a, b;  // id counts in A and B
  for (const int32_t id : ids) {
    ++a[id];
    ++b[id];
  }
  int64_t dot = 0;  // sum_v a_v b_v
  for (const auto& [id, c] : a) dot += c * c;
  const auto at = [&](int64_t i) { return ids[static_cast<size_t>(i)]; };
  for (int64_t k = 1; k <= max_lag && k < n; ++k) {
    // A drops ids[n - k]: dot loses b_v; B drops ids[k - 1]: dot loses a_v (after A's update).
    const int32_t va = at(n - k);
    dot -= b[va];
    --a[va];
    const int32_t vb = at(k - 1);
    dot -= a[vb];
    --b[vb];
    const int64_t pairs = n - k;
    int64_t same = 0;
    for (int64_t t = k; t < n; ++t) same += at(t) == at(t - k) ? 1 : 0;
    const double po = static_cast<double>(same) / static_cast<double>(pairs);
    const double pe =
        static_cast<double>(dot) / (static_cast<double>(pairs) * static_cast<double>(pairs));
    if (pairs < 2 || pe >= 1.0)
      acf[static_cast<size_t>(k)] = same == pairs ? 1.0 : kNaN;
    else
      acf[static_cast<size_t>(k)] = (po - pe) / (1.0 - pe);
  }
  return acf;
}

std::vector<double> pearson_acf(const std::vector<double>& x, int64_t max_lag) {
  const auto n = static_cast<int64_t>(x.size());
  std::vector<double> acf(static_cast<size_t>(std::max<int64_t>(max_lag, 0) + 1), kNaN);
  if (n == 0 || acf.empty()) return acf;
  double mean = 0.0;
  for (const double v : x) mean += v;
  mean /= static_cast<double>(n);
  double var = 0.0;
  for (const double v : x) var += (v - mean) * (v - mean);
  if (!(var > 0.0) || !std::isfinite(var)) return acf;  // constant, or a NaN/Inf inside
  for (int64_t k = 0; k <= max_lag && k < n; ++k) {
    double c = 0.0;
    for (int64_t t = 0; t + k < n; ++t)
      c += (x[static_cast<size_t>(t)] - mean) * (x[static_cast<size_t>(t + k)] - mean);
    acf[static_cast<size_t>(k)] = c / var;
  }
  return acf;
}

// Only local maxima compete: a smooth series (the top-1 probability drifts) correlates most
// at lag 1 simply because neighbours are alike, which is not a period. acf[0] = 1, so lag 1
// is a peak only when the series agrees with itself shifted by one as much as unshifted.
Period dominant_period(const std::vector<double>& acf) {
  const auto peak = [&](size_t k) {
    if (!std::isfinite(acf[k])) return false;
    const bool left = !(acf[k - 1] > acf[k]);  // a NaN neighbour does not disqualify
    const bool right = k + 1 >= acf.size() || !(acf[k + 1] > acf[k]);
    return left && right;
  };
  Period best{0, kNaN};
  for (size_t k = 1; k < acf.size(); ++k)
    if (peak(k) && (best.lag == 0 || acf[k] > best.strength))
      best = Period{static_cast<int64_t>(k), acf[k]};
  if (best.lag == 0) return best;
  // The fundamental: the smallest divisor that is a peak too and almost as strong.
  for (int64_t d = 1; d < best.lag; ++d) {
    const double v = acf[static_cast<size_t>(d)];
    if (best.lag % d == 0 && peak(static_cast<size_t>(d)) && v >= best.strength - kPeriodTolerance)
      return Period{d, v};
  }
  return best;
}

double top1_probability(const float* logits, int32_t n_vocab) {
  float mx = -std::numeric_limits<float>::infinity();
  for (int32_t i = 0; i < n_vocab; ++i) {
    if (std::isnan(logits[i])) return kNaN;
    mx = std::max(mx, logits[i]);
  }
  if (!std::isfinite(mx)) return kNaN;  // all -inf, or a +inf logit: no defined softmax
  double sum = 0.0;
  for (int32_t i = 0; i < n_vocab; ++i)
    sum += std::exp(static_cast<double>(logits[i]) - static_cast<double>(mx));
  return 1.0 / sum;
}

namespace {

// Tokens of the last w that differ from the token p before them, counting no further than
// `limit` + 1: most periods of text that does not loop fail within a few comparisons, which
// keeps the online check cheap.
int64_t misses(const std::vector<int32_t>& ids, int64_t p, int64_t w, int64_t limit) {
  const auto n = static_cast<int64_t>(ids.size());
  int64_t m = 0;
  for (int64_t t = n - w; t < n && m <= limit; ++t)
    m += ids[static_cast<size_t>(t)] != ids[static_cast<size_t>(t - p)] ? 1 : 0;
  return m;
}

}  // namespace

LoopMatch find_loop(const std::vector<int32_t>& ids) {
  const auto n = static_cast<int64_t>(ids.size());
  for (int64_t p = 1;; ++p) {
    const int64_t w = std::max(2 * p, kMinLoopSpan);
    if (w + p > n) break;  // w + p grows with p: no longer period fits either
    const auto allowed =
        static_cast<int64_t>(std::floor((1.0 - kLoopMatchRate) * static_cast<double>(w) + 1e-9));
    int64_t miss = misses(ids, p, w, allowed);
    if (miss > allowed) continue;
    // A longer window tolerates more misses, so a loop of period d with one stray token can
    // pass first as 2d: a divisor that passes over the same window is the real period.
    int64_t period = p;
    for (int64_t d = 1; d < p; ++d) {
      if (p % d != 0) continue;
      const int64_t md = misses(ids, d, w, allowed);
      if (md <= allowed) {
        period = d;
        miss = md;
        break;
      }
    }
    LoopMatch m{true, period, w, static_cast<double>(w - miss) / static_cast<double>(w), 0, n};
    // Exact repetition reaches back from the tested span to the loop's start.
    int64_t t = n - w - 1;
    while (t >= period && ids[static_cast<size_t>(t)] == ids[static_cast<size_t>(t - period)]) --t;
    m.start = std::max<int64_t>(t + 1 - period, 0);
    return m;
  }
  return LoopMatch{};
}

LoopMatch first_loop(const std::vector<int32_t>& ids) {
  LoopDetector d;
  for (const int32_t id : ids) {
    d.push(id);
    if (d.detected()) break;
  }
  return d.match();
}

void LoopDetector::push(int32_t id) {
  ids_.push_back(id);
  if (!match_.detected) match_ = find_loop(ids_);
}

}  // namespace llmctl
