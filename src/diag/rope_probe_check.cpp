// rope-probe's checks, JSON and baseline comparison (rope_probe_check.h).
#include "diag/rope_probe_check.h"

#include <fmt/format.h>

#include <cmath>

namespace llmctl {

// JSON members named as the struct fields (rope_probe.h documents them).
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ShiftRow, offset, kl_mean, kl_max, max_dlogit)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(AngleRow, freq_base, pos, f32_angle_err, f32_rot_err,
                                   f64_rot_err)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(AblationResult, kl_zero_mean, kl_shuffled_last,
                                   kl_zero_shuffled_last)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(DistancePoint, n_filler, n_tokens, p_expected, rank, kl_vs_0)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(SweepRow, name, detail, nll, configured)

namespace {

const char* rope_type_name(RopeType t) { return t == RopeType::Normal ? "normal" : "neox"; }

// Flattens every number under `j` into (path, value).
void flatten(const nlohmann::json& j, const std::string& path,
             std::vector<std::pair<std::string, double>>& out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (path.empty() && (it.key() == "thresholds" || it.key() == "failures")) continue;
      flatten(it.value(), path.empty() ? it.key() : path + "." + it.key(), out);
    }
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) flatten(j[i], fmt::format("{}[{}]", path, i), out);
  } else if (j.is_number()) {
    out.emplace_back(path, j.get<double>());
  }
}

// The value at a flattened path, or nullptr.
const nlohmann::json* lookup(const nlohmann::json& root, const std::string& path) {
  const nlohmann::json* j = &root;
  size_t i = 0;
  while (i < path.size()) {
    if (path[i] == '.') ++i;
    if (path[i] == '[') {
      const size_t close = path.find(']', i);
      const size_t k = std::stoul(path.substr(i + 1, close - i - 1));
      if (!j->is_array() || k >= j->size()) return nullptr;
      j = &(*j)[k];
      i = close + 1;
    } else {
      const size_t end = path.find_first_of(".[", i);
      const std::string key = path.substr(i, end == std::string::npos ? end : end - i);
      if (!j->is_object() || !j->contains(key)) return nullptr;
      j = &(*j)[key];
      i = end == std::string::npos ? path.size() : end;
    }
  }
  return j;
}

}  // namespace

std::vector<std::string> check_rope_probe(const RopeProbeReport& r, const RopeThresholds& t) {
  std::vector<std::string> fail;
  for (const ShiftRow& s : r.shift) {
    if (!(s.kl_max <= t.max_shift_kl))
      fail.push_back(
          fmt::format("shift: offset {}: max KL {:.3g} > {:g} (--max-shift-kl); RoPE "
                      "is not shift invariant here",
                      s.offset, s.kl_max, t.max_shift_kl));
    if (!(s.max_dlogit <= t.max_shift_dlogit))
      fail.push_back(
          fmt::format("shift: offset {}: max |dlogit| {:.3g} > {:g} (--max-shift-dlogit)", s.offset,
                      s.max_dlogit, t.max_shift_dlogit));
  }
  if (r.probes.ablation && !(r.ablation.kl_zero_mean >= t.min_ablation_kl))
    fail.push_back(
        fmt::format("ablation: KL with all positions 0 is {:.3g} < {:g} "
                    "(--min-ablation-kl); the model barely uses positions (or the "
                    "positions reach no layer: RoPE frozen)",
                    r.ablation.kl_zero_mean, t.min_ablation_kl));
  const SweepRow* configured = nullptr;
  const SweepRow* best = nullptr;
  for (const SweepRow& s : r.sweep.rows) {
    if (s.configured) configured = &s;
    if (best == nullptr || s.nll < best->nll) best = &s;
  }
  if (configured != nullptr && best != nullptr && !best->configured &&
      !(configured->nll <= best->nll + t.sweep_margin))
    fail.push_back(
        fmt::format("sweep: '{}' ({}) fits the weights better than the configured RoPE "
                    "({}): NLL {:.4f} < {:.4f} nats/token; the metadata may be wrong",
                    best->name, best->detail, configured->detail, best->nll, configured->nll));
  return fail;
}

nlohmann::json rope_probe_json(const RopeProbeReport& r, const RopeThresholds& t) {
  using nlohmann::json;
  const ModelConfig& c = r.config;
  json j;
  j["model"] = r.model;
  j["backend"] = r.backend;
  nlohmann::json groups = json::array();
  for (const RopeLayerGroup& g : rope_layer_groups(c))
    groups.push_back({{"layers", g.layers},
                      {"window", g.window},
                      {"local", g.local},
                      {"rope_freq_base", g.freq_base},
                      {"rope_freq_scale", g.freq_scale}});
  j["config"] = {{"arch", c.arch},
                 {"n_ctx_train", c.n_ctx_train},
                 {"head_dim", c.head_dim},
                 {"n_rot", c.n_rot},
                 {"rope_type", rope_type_name(c.rope_type)},
                 {"rope_freq_base", c.rope_freq_base},
                 {"rope_freq_scale", c.rope_freq_scale},
                 {"rope_layers", groups}};
  j["prompt_tokens"] = r.prompt_tokens;
  json probes = json::array();
  if (r.probes.shift) {
    probes.push_back("shift");
    j["shift"] = r.shift;
    j["angles"] = r.angles;
  }
  if (r.probes.ablation) {
    probes.push_back("ablation");
    j["ablation"] = r.ablation;
  }
  if (r.probes.distance) {
    probes.push_back("distance");
    json curves = json::array();
    for (const DistanceCurve& dc : r.distance.curves)
      curves.push_back({{"label", dc.label}, {"points", dc.points}});
    j["distance"] = {{"expected_id", r.distance.expected_id},
                     {"expected_piece", r.distance.expected_piece},
                     {"curves", curves}};
  }
  if (r.probes.sweep) {
    probes.push_back("sweep");
    j["sweep"] = {{"n_tokens", r.sweep.n_tokens}, {"rows", r.sweep.rows}};
  }
  j["probes"] = probes;
  j["thresholds"] = {{"max_shift_kl", t.max_shift_kl},
                     {"max_shift_dlogit", t.max_shift_dlogit},
                     {"min_ablation_kl", t.min_ablation_kl},
                     {"sweep_margin", t.sweep_margin}};
  j["failures"] = check_rope_probe(r, t);
  return j;
}

std::vector<std::string> compare_rope_baseline(const nlohmann::json& current,
                                               const nlohmann::json& baseline,
                                               const DriftTolerance& tol) {
  std::vector<std::pair<std::string, double>> base;
  flatten(baseline, "", base);
  std::vector<std::string> fail;
  for (const auto& [path, b] : base) {
    const nlohmann::json* cur = lookup(current, path);
    if (cur == nullptr || !cur->is_number()) {
      fail.push_back(
          fmt::format("baseline: {} is in the baseline but not in this run (run with "
                      "the baseline's options)",
                      path));
      continue;
    }
    const double c = cur->get<double>();
    if (!(std::fabs(c - b) <= tol.abs + tol.rel * std::fabs(b)))
      fail.push_back(
          fmt::format("baseline: {} is {:.6g}, baseline {:.6g} (drift beyond {:g} + "
                      "{:g} x |baseline|; --drift-abs, --drift-rel)",
                      path, c, b, tol.abs, tol.rel));
  }
  return fail;
}

}  // namespace llmctl
