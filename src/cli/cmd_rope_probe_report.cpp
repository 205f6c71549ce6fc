// `llmctl rope-probe` tables and charts (rope_probe_report.h).
#include <fmt/format.h>

#include <cmath>

#include "cli/rope_probe_report.h"
#include "diag/svg_plot.h"

namespace llmctl::cli {

namespace {

// "0-4, 6-10, 12" for {0, 1, 2, 3, 4, 6, ...}.
std::string layer_list(const std::vector<int64_t>& layers) {
  std::string s;
  for (size_t i = 0; i < layers.size();) {
    size_t j = i;
    while (j + 1 < layers.size() && layers[j + 1] == layers[j] + 1) ++j;
    if (!s.empty()) s += ", ";
    s += j == i ? fmt::format("{}", layers[i]) : fmt::format("{}-{}", layers[i], layers[j]);
    i = j + 1;
  }
  return s;
}

void print_shift(const RopeProbeReport& r) {
  fmt::print(
      "\n## 1. Shift invariance ({} prompt tokens; RoPE positions offset .. offset + {})\n\n",
      r.prompt_tokens, r.prompt_tokens - 1);
  fmt::print("| offset | KL mean (nats) | KL max | max |dlogit| |\n|---:|---:|---:|---:|\n");
  for (const ShiftRow& s : r.shift)
    fmt::print("| {} | {:.3g} | {:.3g} | {:.3g} |\n", s.offset, s.kl_mean, s.kl_max, s.max_dlogit);
  fmt::print(
      "\nAngle precision (analytic, every pair): float32 angles (p * theta_scale^i in "
      "float) against float64\n\n");
  fmt::print(
      "| base | position | f32 angle error (rad) | f32 cos/sin error | llmctl f64 cos/sin error "
      "|\n|---:|---:|---:|---:|---:|\n");
  for (const AngleRow& a : r.angles)
    fmt::print("| {:g} | {} | {:.3g} | {:.3g} | {:.3g} |\n", a.freq_base, a.pos, a.f32_angle_err,
               a.f32_rot_err, a.f64_rot_err);
}

void print_ablation(const RopeProbeReport& r) {
  const AblationResult& a = r.ablation;
  fmt::print("\n## 2. Position ablation (KL against the normal run; large = positions matter)\n\n");
  fmt::print("| comparison | KL (nats) |\n|---|---:|\n");
  fmt::print("| all positions 0, mean over the prompt | {:.4g} |\n", a.kl_zero_mean);
  fmt::print("| middle tokens shuffled, last position | {:.4g} |\n", a.kl_shuffled_last);
  fmt::print("| shuffled, both with positions 0, last position | {:.4g} |\n",
             a.kl_zero_shuffled_last);
}

void print_distance(const RopeProbeReport& r) {
  const DistanceResult& d = r.distance;
  fmt::print("\n## 3. Distance: P('{}' , id {}) after fact + N filler tokens + cue\n\n",
             d.expected_piece, d.expected_id);
  std::string head = "| N | tokens |";
  std::string rule = "|---:|---:|";
  for (const DistanceCurve& c : d.curves) {
    head += fmt::format(" p ({0}) | rank ({0}) | KL vs N=0 ({0}) |", c.label);
    rule += "---:|---:|---:|";
  }
  fmt::print("{}\n{}\n", head, rule);
  for (size_t i = 0; i < d.curves.front().points.size(); ++i) {
    const DistancePoint& p0 = d.curves.front().points[i];
    std::string line = fmt::format("| {} | {} |", p0.n_filler, p0.n_tokens);
    for (const DistanceCurve& c : d.curves) {
      const DistancePoint& p = c.points[i];
      line += fmt::format(" {:.4f} | {} | {:.4g} |", p.p_expected, p.rank, p.kl_vs_0);
    }
    fmt::print("{}\n", line);
  }
}

void print_sweep(const RopeProbeReport& r) {
  fmt::print("\n## 4. Configuration sweep: reference text, {} tokens predicted\n\n",
             r.sweep.n_tokens);
  double configured = 0;
  for (const SweepRow& s : r.sweep.rows)
    if (s.configured) configured = s.nll;
  fmt::print(
      "| variant | RoPE | NLL (nats/token) | perplexity | vs configured |\n"
      "|---|---|---:|---:|---:|\n");
  for (const SweepRow& s : r.sweep.rows)
    fmt::print("| {} | {} | {:.4f} | {:.3f} | {:+.4f} |\n", s.name, s.detail, s.nll,
               std::exp(s.nll), s.nll - configured);
}

}  // namespace

void print_rope_probe_tables(const RopeProbeReport& r, const std::vector<std::string>& failures) {
  const ModelConfig& c = r.config;
  fmt::print("# rope-probe: {} on {}\n\n", r.model, r.backend);
  fmt::print("{}: n_ctx_train {}, head_dim {}, n_rot {}, {}\n", c.arch, c.n_ctx_train, c.head_dim,
             c.n_rot, describe_rope(c));
  const std::vector<RopeLayerGroup> groups = rope_layer_groups(c);
  if (groups.size() > 1)
    for (const RopeLayerGroup& g : groups)
      fmt::print("  {} layers {}: {}, RoPE base {:g}, scale {:g}\n", g.layers.size(),
                 layer_list(g.layers), g.window > 0 ? fmt::format("window {}", g.window) : "global",
                 g.freq_base, g.freq_scale);
  if (r.probes.shift) print_shift(r);
  if (r.probes.ablation) print_ablation(r);
  if (r.probes.distance) print_distance(r);
  if (r.probes.sweep) print_sweep(r);
  fmt::print("\n## Checks\n\n");
  if (failures.empty()) fmt::print("all checks pass\n");
  for (const std::string& f : failures) fmt::print("FAIL {}\n", f);
}

std::vector<std::string> write_rope_probe_svgs(const RopeProbeReport& r, const std::string& path) {
  SvgPlot dist;
  dist.title = fmt::format("rope-probe distance curve: P('{}') after N filler tokens",
                           r.distance.expected_piece);
  dist.x_label = "N + 1 (filler tokens + 1)";
  dist.y_label = "P(expected token)";
  dist.log_x = true;
  for (const DistanceCurve& c : r.distance.curves) {
    SvgSeries s;
    s.label = c.label;
    for (const DistancePoint& p : c.points) {
      s.x.push_back(static_cast<double>(p.n_filler + 1));
      s.y.push_back(p.p_expected);
    }
    dist.series.push_back(s);
  }
  SvgPlot ang;
  ang.title = "RoPE cos/sin error against position: float32 vs float64 angles";
  ang.x_label = "position";
  ang.y_label = "max |cos, sin error|";
  ang.log_x = true;
  ang.log_y = true;
  // One pair of series per RoPE base (Gemma 3: the global and the local one).
  for (size_t i = 0; i < r.angles.size(); ++i) {
    const double base = r.angles[i].freq_base;
    if (i > 0 && r.angles[i - 1].freq_base == base) continue;
    const std::string of =
        rope_layer_groups(r.config).size() > 1 ? fmt::format(", base {:g}", base) : std::string();
    SvgSeries f32{"float32 angles" + of, {}, {}, false};
    SvgSeries f64{"float64 angles (llmctl)" + of, {}, {}, false};
    for (const AngleRow& a : r.angles) {
      if (a.freq_base != base) continue;
      f32.x.push_back(static_cast<double>(a.pos));
      f32.y.push_back(a.f32_rot_err);
      f64.x.push_back(static_cast<double>(a.pos));
      f64.y.push_back(a.f64_rot_err);
    }
    ang.series.push_back(f32);
    ang.series.push_back(f64);
  }
  const bool has_ext = path.size() > 4 && path.compare(path.size() - 4, 4, ".svg") == 0;
  const std::string angles_path =
      (has_ext ? path.substr(0, path.size() - 4) : path) + "-angles.svg";
  write_svg(path, dist);
  write_svg(angles_path, ang);
  return {path, angles_path};
}

}  // namespace llmctl::cli
