// Table, turn line and JSON of the router statistics (moe_stats_report.h).
#include "diag/moe_stats_report.h"

#include <fmt/format.h>

#include <cmath>

#include "diag/report_format.h"

namespace llmctl {

namespace {

// Experts whose counts fit as columns of the main table; more go to a block of their own.
constexpr int64_t kCountColumns = 16;

std::string joined(const std::vector<int32_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += fmt::format("{}{}", i == 0 ? "" : ", ", v[i]);
  return s;
}

std::string counts(const std::vector<int64_t>& c, size_t first, size_t n) {
  std::string s;
  for (size_t e = first; e < first + n && e < c.size(); ++e) s += fmt::format(" {:>5}", c[e]);
  return s;
}

}  // namespace

std::string moe_stats_table(const MoeStatsCollector& c) {
  int64_t n_routed = 0;
  for (int64_t l = 0; l < c.n_layers(); ++l) n_routed += c.routed(l) ? 1 : 0;
  const double uniform = std::log(static_cast<double>(c.n_expert()));
  std::string s = fmt::format(
      "moe statistics: {} layers with experts, top-{} of {} experts, over {} tokens (router "
      "entropy in nats, its maximum ln {} = {:.3f}; top_k_mass: the chosen experts' share of the "
      "softmax; max_load: the busiest expert's tokens over an even share; idle: experts never "
      "chosen)\n",
      n_routed, c.k(), c.n_expert(), c.n_tokens(), c.n_expert(), uniform);
  const bool columns = c.n_expert() <= kCountColumns;
  s += fmt::format("{:>5} {:>7} {:>7} {:>10} {:>8} {:>5}", "layer", "tokens", "entropy",
                   "top_k_mass", "max_load", "idle");
  if (columns)
    for (int64_t e = 0; e < c.n_expert(); ++e) s += fmt::format(" {:>5}", fmt::format("e{}", e));
  s += "\n";
  std::string idle_lines, blocks, nonfinite;
  for (int64_t l = 0; l < c.n_layers(); ++l) {
    if (!c.routed(l)) continue;
    const MoeLayerStats& a = c.layer(l);
    const std::vector<int32_t> idle = a.never_chosen();
    s += fmt::format("{:>5} {:>7} {} {} {} {:>5}{}\n", l, a.n_tokens,
                     table_cell(a.mean_entropy(), 7, 3), table_cell(a.mean_top_k_mass(), 10, 4),
                     table_cell(a.max_load(c.k()), 8, 2), idle.size(),
                     columns ? counts(a.expert_tokens, 0, a.expert_tokens.size()) : "");
    if (!columns)
      for (size_t first = 0; first < a.expert_tokens.size(); first += kCountColumns)
        blocks += fmt::format("{:>5} {:>5}{}\n", first == 0 ? fmt::format("{}", l) : "",
                              fmt::format("e{}", first), counts(a.expert_tokens, first, kCountColumns));
    if (!idle.empty()) idle_lines += fmt::format("never chosen: layer {}: {}\n", l, joined(idle));
    if (a.n_nonfinite > 0)
      nonfinite += fmt::format("{}layer {}: {}", nonfinite.empty() ? "" : "; ", l, a.n_nonfinite);
  }
  if (!columns) s += "tokens per expert (layer, first expert of the line, 16 per line):\n" + blocks;
  s += idle_lines;
  if (!nonfinite.empty())
    s += "router rows with NaN/Inf logits (no entropy or mass): " + nonfinite + "\n";
  return s;
}

std::string moe_stats_line(const MoeStatsCollector& c) {
  double entropy = 0, mass = 0;
  int64_t n = 0, idle = 0, pairs = 0;
  for (int64_t l = 0; l < c.n_layers(); ++l) {
    if (!c.routed(l)) continue;
    const MoeLayerStats& a = c.layer(l);
    idle += static_cast<int64_t>(a.never_chosen().size());
    pairs += c.n_expert();
    if (a.n_finite == 0) continue;
    entropy += a.mean_entropy();
    mass += a.mean_top_k_mass();
    ++n;
  }
  const double dn = static_cast<double>(n);
  return fmt::format(
      "{} tokens, top-{} of {}: router entropy {} nats (uniform {:.3f}), top-k mass {}, {} of {} "
      "(layer, expert) pairs never chosen",
      c.n_tokens(), c.k(), c.n_expert(), n > 0 ? fmt::format("{:.3f}", entropy / dn) : "-",
      std::log(static_cast<double>(c.n_expert())), n > 0 ? fmt::format("{:.4f}", mass / dn) : "-",
      idle, pairs);
}

nlohmann::json moe_stats_json(const MoeStatsCollector& c) {
  nlohmann::json layers = nlohmann::json::array();
  for (int64_t l = 0; l < c.n_layers(); ++l) {
    if (!c.routed(l)) continue;
    const MoeLayerStats& a = c.layer(l);
    layers.push_back(nlohmann::json{{"layer", l},
                                    {"tokens", a.n_tokens},
                                    {"entropy", json_or_null(a.mean_entropy())},
                                    {"top_k_mass", json_or_null(a.mean_top_k_mass())},
                                    {"max_load", json_or_null(a.max_load(c.k()))},
                                    {"nonfinite_rows", a.n_nonfinite},
                                    {"expert_tokens", a.expert_tokens},
                                    {"never_chosen", a.never_chosen()}});
  }
  return nlohmann::json{{"n_layers", c.n_layers()},
                        {"n_experts", c.n_expert()},
                        {"k", c.k()},
                        {"n_tokens", c.n_tokens()},
                        {"uniform_entropy", std::log(static_cast<double>(c.n_expert()))},
                        {"layers", layers}};
}

}  // namespace llmctl
