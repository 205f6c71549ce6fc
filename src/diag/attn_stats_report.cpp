// Table, alert line and JSON of the attention statistics (attn_stats_report.h).
#include "diag/attn_stats_report.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace llmctl {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// JSON has no NaN or infinity: a statistic that does not exist is null.
nlohmann::json num(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

// A fixed-width cell; "-" for a statistic that does not exist.
std::string cell(double v, int width, int decimals) {
  if (!std::isfinite(v)) return fmt::format("{:>{}}", "-", width);
  return fmt::format("{:>{}.{}f}", v, width, decimals);
}

nlohmann::json head_json(const AttnHeadStats& a) {
  const bool any = a.n_finite > 0;
  return nlohmann::json{{"max", any ? num(a.max) : nlohmann::json()},
                        {"max_position", any ? nlohmann::json(a.max_pos) : nlohmann::json()},
                        {"min", any ? num(a.min) : nlohmann::json()},
                        {"mean", num(a.mean())},
                        {"std", num(a.std())},
                        {"nan", a.n_nan},
                        {"inf", a.n_inf},
                        {"entropy", num(a.mean_entropy())},
                        {"uniform_entropy", num(a.mean_uniform_entropy())},
                        {"queries", a.n_queries}};
}

}  // namespace

std::string attn_stats_table(const AttnStatsCollector& c) {
  std::string s = fmt::format(
      "attention statistics: {} layers x {} heads over {} query tokens (scaled scores "
      "q.k/sqrt(head_dim) before the softmax; entropy in nats, uniform = its maximum)\n",
      c.n_layers(), c.n_heads(), c.n_tokens());
  s += fmt::format("{:>5} {:>9} {:>4} {:>5} {:>9} {:>8} {:>7} {:>5} {:>5} {:>7} {:>7} {:>12}\n",
                   "layer", "max", "head", "pos", "min", "mean", "std", "nan", "inf", "entropy",
                   "uniform", "resid_absmax");
  const ResidualStats& emb = c.residual(-1);
  s += fmt::format("{:>5} {:>88}{}\n", "emb", cell(emb.abs_max, 12, 4),
                   emb.n_nonfinite > 0 ? fmt::format(" ({} non-finite)", emb.n_nonfinite) : "");
  for (int64_t l = 0; l < c.n_layers(); ++l) {
    const AttnHeadStats a = c.layer(l);
    const ResidualStats& r = c.residual(l);
    const bool any = a.n_finite > 0;
    s += fmt::format(
        "{:>5} {} {:>4} {:>5} {} {} {} {:>5} {:>5} {} {} {}{}\n", l, cell(any ? a.max : kNaN, 9, 3),
        any ? fmt::format("{}", a.max_head) : "-", any ? fmt::format("{}", a.max_pos) : "-",
        cell(any ? a.min : kNaN, 9, 3), cell(a.mean(), 8, 3), cell(a.std(), 7, 3), a.n_nan, a.n_inf,
        cell(a.mean_entropy(), 7, 3), cell(a.mean_uniform_entropy(), 7, 3), cell(r.abs_max, 12, 4),
        r.n_nonfinite > 0 ? fmt::format(" ({} non-finite)", r.n_nonfinite) : "");
  }
  return s;
}

std::string attn_alert_text(const AttnAlert& a, double threshold) {
  switch (a.kind) {
    case AttnAlert::Kind::ScoreMax:
      return fmt::format(
          "layer {} head {} position {} (token id {}): scaled score {:.4g} > "
          "--attn-alert {:g}",
          a.layer, a.head, a.pos, a.token, a.value, threshold);
    case AttnAlert::Kind::NonFiniteScore:
      return fmt::format("layer {} head {} position {} (token id {}): {} NaN/Inf scores", a.layer,
                         a.head, a.pos, a.token, static_cast<int64_t>(a.value));
    case AttnAlert::Kind::NonFiniteResidual:
      return fmt::format(
          "residual after {} position {} (token id {}): {} NaN/Inf values",
          a.layer < 0 ? std::string("the embeddings") : fmt::format("layer {}", a.layer), a.pos,
          a.token, static_cast<int64_t>(a.value));
  }
  return "";
}

nlohmann::json attn_stats_json(const AttnStatsCollector& c) {
  nlohmann::json layers = nlohmann::json::array();
  for (int64_t l = 0; l < c.n_layers(); ++l) {
    const AttnHeadStats a = c.layer(l);
    nlohmann::json heads = nlohmann::json::array();
    for (int64_t h = 0; h < c.n_heads(); ++h) {
      nlohmann::json jh = head_json(c.head(l, h));
      jh["head"] = h;
      heads.push_back(std::move(jh));
    }
    nlohmann::json jl = head_json(a);
    jl.erase("queries");
    jl["layer"] = l;
    jl["max_head"] = a.n_finite > 0 ? nlohmann::json(a.max_head) : nlohmann::json();
    jl["residual_abs_max"] = num(c.residual(l).abs_max);
    jl["residual_nonfinite"] = c.residual(l).n_nonfinite;
    jl["heads"] = std::move(heads);
    layers.push_back(std::move(jl));
  }
  nlohmann::json alert;
  if (const auto& al = c.alert()) {
    alert = nlohmann::json{{"kind", attn_alert_kind_name(al->kind)},
                           {"layer", al->layer},
                           {"head", al->head < 0 ? nlohmann::json() : nlohmann::json(al->head)},
                           {"position", al->pos},
                           {"token", al->token},
                           {"value", num(al->value)},
                           {"text", attn_alert_text(*al, c.alert_threshold())}};
  }
  const auto first_bad = c.first_nonfinite_residual_layer();
  return nlohmann::json{
      {"alert_threshold", c.alert_threshold()},
      {"n_layers", c.n_layers()},
      {"n_heads", c.n_heads()},
      {"n_tokens", c.n_tokens()},
      {"embeddings_abs_max", num(c.residual(-1).abs_max)},
      {"first_nonfinite_residual_layer", first_bad ? nlohmann::json(*first_bad) : nlohmann::json()},
      {"alert", alert},
      {"layers", layers}};
}

}  // namespace llmctl
