// Folding the router's choices over a run (moe_stats.h).
#include "diag/moe_stats.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace llmctl {

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
}  // namespace

double MoeLayerStats::mean_entropy() const {
  return n_finite > 0 ? entropy_sum / static_cast<double>(n_finite) : kNaN;
}

double MoeLayerStats::mean_top_k_mass() const {
  return n_finite > 0 ? top_k_mass_sum / static_cast<double>(n_finite) : kNaN;
}

double MoeLayerStats::max_load(int64_t k) const {
  if (n_tokens == 0 || expert_tokens.empty()) return kNaN;
  const double uniform = static_cast<double>(n_tokens * k) / static_cast<double>(expert_tokens.size());
  return static_cast<double>(*std::max_element(expert_tokens.begin(), expert_tokens.end())) /
         uniform;
}

std::vector<int32_t> MoeLayerStats::never_chosen() const {
  std::vector<int32_t> idle;
  for (size_t e = 0; e < expert_tokens.size(); ++e)
    if (expert_tokens[e] == 0) idle.push_back(static_cast<int32_t>(e));
  return idle;
}

// H = -sum p_i ln p_i with p_i = e_i / Z, e_i = exp(x_i - max), Z = sum e_i:
//   H = ln Z - sum e_i (x_i - max) / Z   (the e_i = 0 terms of -Inf logits contribute nothing).
bool router_entropy_and_mass(const float* logits, int64_t n, const int32_t* ids, int64_t k,
                             double* entropy, double* mass) {
  double max_v = -std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < n; ++i) {
    const auto x = static_cast<double>(logits[i]);
    if (std::isnan(x) || x == std::numeric_limits<double>::infinity()) return false;
    max_v = std::max(max_v, x);
  }
  if (!std::isfinite(max_v)) return false;  // every logit -Inf
  double z = 0, weighted = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(logits[i]) - max_v;
    const double e = std::exp(d);
    if (e == 0.0) continue;
    z += e;
    weighted += e * d;
  }
  double chosen = 0;
  for (int64_t r = 0; r < k; ++r) chosen += std::exp(static_cast<double>(logits[ids[r]]) - max_v);
  *entropy = std::log(z) - weighted / z;
  *mass = chosen / z;
  return true;
}

MoeStatsCollector::MoeStatsCollector(int64_t n_layers, int64_t n_expert, int64_t k)
    : n_expert_(n_expert), k_(k), layers_(static_cast<size_t>(std::max<int64_t>(n_layers, 0))) {
  if (n_layers < 1 || n_expert < 1 || k < 1 || k > n_expert)
    throw Error(fmt::format("moe statistics: {} layers, top-{} of {} experts, expected >= 1 "
                            "layer and 1 <= k <= experts",
                            n_layers, k, n_expert));
  for (MoeLayerStats& l : layers_) l.expert_tokens.assign(static_cast<size_t>(n_expert), 0);
}

const MoeLayerStats& MoeStatsCollector::layer(int64_t l) const {
  LLMCTL_ASSERT(l >= 0 && l < n_layers());
  return layers_[static_cast<size_t>(l)];
}

int64_t MoeStatsCollector::n_tokens() const {
  int64_t n = 0;
  for (const MoeLayerStats& l : layers_) n = std::max(n, l.n_tokens);
  return n;
}

// logits (n_tokens, n_expert), ids and weights (n_tokens, k).
void MoeStatsCollector::on_moe_routing(int64_t layer, const ObservedBatch& batch,
                                       const float* logits, int64_t n_expert, const int32_t* ids,
                                       const float* /*weights*/, int64_t k) {
  LLMCTL_ASSERT(layer >= 0 && layer < n_layers() && n_expert == n_expert_ && k == k_);
  MoeLayerStats& s = layers_[static_cast<size_t>(layer)];
  for (int64_t t = 0; t < batch.n_tokens; ++t) {
    const int32_t* id = ids + t * k;
    for (int64_t r = 0; r < k; ++r) {
      LLMCTL_ASSERT(id[r] >= 0 && id[r] < n_expert);
      ++s.expert_tokens[static_cast<size_t>(id[r])];
    }
    double entropy = 0, mass = 0;
    if (router_entropy_and_mass(logits + t * n_expert, n_expert, id, k, &entropy, &mass)) {
      s.entropy_sum += entropy;
      s.top_k_mass_sum += mass;
      ++s.n_finite;
    } else {
      ++s.n_nonfinite;
    }
  }
  s.n_tokens += batch.n_tokens;
}

}  // namespace llmctl
