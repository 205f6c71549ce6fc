// Folding attention statistics and residual abs-maxima over a run (attn_stats.h).
#include "diag/attn_stats.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <tuple>

#include "core/error.h"

namespace llmctl {

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The alert order (attn_stats.h): (layer, stage, position, head), stage 0 for scores and 1
// for the residual.
std::tuple<int64_t, int, int64_t, int64_t> alert_order(const AttnAlert& a) {
  return {a.layer, a.kind == AttnAlert::Kind::NonFiniteResidual ? 1 : 0, a.pos, a.head};
}
}  // namespace

double AttnHeadStats::mean() const {
  return n_finite > 0 ? sum / static_cast<double>(n_finite) : kNaN;
}

// E[x^2] - E[x]^2 in double. Its cancellation error is ~1e-16 * E[x^2], far below the
// float rounding of the per-row sums the backend hands over (~1e-7 relative), so the
// one-pass form is no worse than the data; the clamp keeps a rounding-negative variance at 0.
double AttnHeadStats::std() const {
  if (n_finite == 0) return kNaN;
  const double n = static_cast<double>(n_finite);
  const double m = sum / n;
  return std::sqrt(std::max(0.0, sum_sq / n - m * m));
}

double AttnHeadStats::mean_entropy() const {
  return n_entropy > 0 ? entropy_sum / static_cast<double>(n_entropy) : kNaN;
}

double AttnHeadStats::mean_uniform_entropy() const {
  return n_entropy > 0 ? uniform_entropy_sum / static_cast<double>(n_entropy) : kNaN;
}

void AttnHeadStats::merge(const AttnHeadStats& o) {
  if (o.n_finite > 0) {
    if (n_finite == 0 || o.max > max) {
      max = o.max;
      max_head = o.max_head;
      max_pos = o.max_pos;
    }
    min = n_finite == 0 ? o.min : std::min(min, o.min);
  }
  if (o.n_raw_finite > 0) {
    raw_max = n_raw_finite == 0 ? o.raw_max : std::max(raw_max, o.raw_max);
    raw_min = n_raw_finite == 0 ? o.raw_min : std::min(raw_min, o.raw_min);
  }
  n_raw_finite += o.n_raw_finite;
  n_raw_nonfinite += o.n_raw_nonfinite;
  n_fp16_risk += o.n_fp16_risk;
  sum += o.sum;
  sum_sq += o.sum_sq;
  n_finite += o.n_finite;
  n_nan += o.n_nan;
  n_inf += o.n_inf;
  n_queries += o.n_queries;
  entropy_sum += o.entropy_sum;
  n_entropy += o.n_entropy;
  uniform_entropy_sum += o.uniform_entropy_sum;
}

const char* attn_alert_kind_name(AttnAlert::Kind k) {
  switch (k) {
    case AttnAlert::Kind::ScoreMax:
      return "score_max";
    case AttnAlert::Kind::NonFiniteScore:
      return "nonfinite_score";
    case AttnAlert::Kind::NonFiniteResidual:
      return "nonfinite_residual";
  }
  return "unknown";
}

void AttnStatsCollector::raise(const AttnAlert& a) {
  if (!alert_ || alert_order(a) < alert_order(*alert_)) alert_ = a;
}

AttnStatsCollector::AttnStatsCollector(int64_t n_layers, int64_t n_heads,
                                       std::optional<double> alert_threshold, double softcap)
    : n_layers_(n_layers),
      n_heads_(n_heads),
      threshold_(alert_threshold),
      softcap_(softcap),
      heads_(static_cast<size_t>(n_layers * n_heads)),
      residual_(static_cast<size_t>(n_layers + 1)) {
  if (n_layers < 1 || n_heads < 1)
    throw Error(fmt::format("attention statistics: {} layers and {} heads, expected >= 1 each",
                            n_layers, n_heads));
  if (alert_threshold && !std::isfinite(*alert_threshold))
    throw Error(fmt::format("attention statistics: the alert threshold {} is not finite",
                            *alert_threshold));
  for (int64_t l = 0; l < n_layers; ++l)
    for (int64_t h = 0; h < n_heads; ++h) heads_[static_cast<size_t>(l * n_heads + h)].max_head = h;
}

const AttnHeadStats& AttnStatsCollector::head(int64_t layer, int64_t h) const {
  LLMCTL_ASSERT(layer >= 0 && layer < n_layers_ && h >= 0 && h < n_heads_);
  return heads_[static_cast<size_t>(layer * n_heads_ + h)];
}

AttnHeadStats AttnStatsCollector::layer(int64_t layer) const {
  AttnHeadStats all;
  for (int64_t h = 0; h < n_heads_; ++h) all.merge(head(layer, h));
  return all;
}

const ResidualStats& AttnStatsCollector::residual(int64_t layer) const {
  LLMCTL_ASSERT(layer >= -1 && layer < n_layers_);
  return residual_[static_cast<size_t>(layer + 1)];
}

Fp16Risk AttnStatsCollector::fp16_risk() const {
  Fp16Risk r = fp16_first_;
  r.rows = 0;
  r.of_rows = 0;
  r.largest = 0;
  for (const AttnHeadStats& a : heads_) {
    r.rows += a.n_fp16_risk;
    r.of_rows += a.n_queries;
    if (a.n_fp16_risk > 0) r.largest = std::max(r.largest, a.max);
  }
  return r;
}

std::optional<int64_t> AttnStatsCollector::first_nonfinite_residual_layer() const {
  for (int64_t l = -1; l < n_layers_; ++l)
    if (residual(l).n_nonfinite > 0) return l;
  return std::nullopt;
}

// stats (n_tokens, n_heads, kAttnStatFields), AttnStat in backend.h.
void AttnStatsCollector::on_attention_stats(int64_t layer, const ObservedBatch& batch,
                                            const float* stats, int64_t n_heads) {
  LLMCTL_ASSERT(layer >= 0 && layer < n_layers_ && n_heads == n_heads_);
  if (layer == 0) n_tokens_ += batch.n_tokens;
  for (int64_t t = 0; t < batch.n_tokens; ++t) {
    for (int64_t h = 0; h < n_heads; ++h) {
      const float* st = stats + (t * n_heads + h) * kAttnStatFields;
      AttnHeadStats& a = heads_[static_cast<size_t>(layer * n_heads_ + h)];
      const auto count = static_cast<int64_t>(st[kAttnStatCount]);
      const auto n_nan = static_cast<int64_t>(st[kAttnStatNan]);
      const auto n_inf = static_cast<int64_t>(st[kAttnStatInf]);
      const int64_t n_finite = count - n_nan - n_inf;
      const auto mx = static_cast<double>(st[kAttnStatMax]);
      if (n_finite > 0) {
        if (a.n_finite == 0 || mx > a.max) {
          a.max = mx;
          a.max_pos = batch.pos[t];
        }
        const auto mn = static_cast<double>(st[kAttnStatMin]);
        a.min = a.n_finite == 0 ? mn : std::min(a.min, mn);
        a.sum += static_cast<double>(st[kAttnStatSum]);
        a.sum_sq += static_cast<double>(st[kAttnStatSumSq]);
        a.n_finite += n_finite;
      }
      a.n_nan += n_nan;
      a.n_inf += n_inf;
      a.n_queries += 1;
      const auto entropy = static_cast<double>(st[kAttnStatEntropy]);
      if (std::isfinite(entropy)) {
        a.entropy_sum += entropy;
        a.uniform_entropy_sum += std::log(static_cast<double>(count));
        a.n_entropy += 1;
      }
      // Before the soft-cap: a cap maps +-Inf to a finite +-cap, so only these count them.
      const auto n_raw_bad = static_cast<int64_t>(st[kAttnStatRawNonFinite]);
      if (count - n_raw_bad > 0) {
        const auto rmx = static_cast<double>(st[kAttnStatRawMax]);
        const auto rmn = static_cast<double>(st[kAttnStatRawMin]);
        a.raw_max = a.n_raw_finite == 0 ? rmx : std::max(a.raw_max, rmx);
        a.raw_min = a.n_raw_finite == 0 ? rmn : std::min(a.raw_min, rmn);
        a.n_raw_finite += count - n_raw_bad;
      }
      a.n_raw_nonfinite += n_raw_bad;
      if (n_finite > 0 && mx > kFp16SoftmaxLimit) {
        a.n_fp16_risk += 1;
        const auto order = [](int64_t l, int64_t p, int64_t hd) { return std::tuple(l, p, hd); };
        if (fp16_first_.layer < 0 ||
            order(layer, batch.pos[t], h) <
                order(fp16_first_.layer, fp16_first_.pos, fp16_first_.head)) {
          fp16_first_.layer = layer;
          fp16_first_.head = h;
          fp16_first_.pos = batch.pos[t];
        }
      }
      const AttnAlert here{AttnAlert::Kind::ScoreMax, layer, h, batch.pos[t], batch.token[t], mx};
      if (n_nan + n_inf > 0 || n_raw_bad > 0) {
        AttnAlert al = here;
        al.kind = AttnAlert::Kind::NonFiniteScore;
        al.value = static_cast<double>(std::max(n_nan + n_inf, n_raw_bad));
        raise(al);
      } else if (threshold_ && n_finite > 0 && mx > *threshold_) {
        raise(here);
      }
    }
  }
}

// x (n_tokens, n_embd) after layer `layer` (-1: the embeddings).
void AttnStatsCollector::on_residual(int64_t layer, const ObservedBatch& batch, const float* x,
                                     int64_t n_embd) {
  LLMCTL_ASSERT(layer >= -1 && layer < n_layers_);
  ResidualStats& r = residual_[static_cast<size_t>(layer + 1)];
  for (int64_t t = 0; t < batch.n_tokens; ++t) {
    int64_t bad = 0;
    for (int64_t i = 0; i < n_embd; ++i) {
      const float v = x[t * n_embd + i];
      if (!std::isfinite(v)) {
        ++bad;
        continue;
      }
      const double a = std::fabs(static_cast<double>(v));
      if (a > r.abs_max || r.abs_max_pos < 0) {
        r.abs_max = a;
        r.abs_max_pos = batch.pos[t];
      }
    }
    r.n_nonfinite += bad;
    if (bad > 0)
      raise(AttnAlert{AttnAlert::Kind::NonFiniteResidual, layer, -1, batch.pos[t], batch.token[t],
                      static_cast<double>(bad)});
  }
}

}  // namespace llmctl
