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
  const bool any_raw = a.n_raw_finite > 0;
  return nlohmann::json{{"max", any ? num(a.max) : nlohmann::json()},
                        {"raw_max", any_raw ? num(a.raw_max) : nlohmann::json()},
                        {"raw_min", any_raw ? num(a.raw_min) : nlohmann::json()},
                        {"raw_nonfinite", a.n_raw_nonfinite},
                        {"fp16_risk_rows", a.n_fp16_risk},
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

std::string fp16_risk_text(const AttnStatsCollector& c) {
  const Fp16Risk r = c.fp16_risk();
  if (r.rows == 0)
    return fmt::format(
        "no (token, head) row has a max score above ln(65504) = {:.2f} (fp16 softmax without "
        "max subtraction would not overflow here)",
        kFp16SoftmaxLimit);
  return fmt::format(
      "{} of {} (token, head) rows have a max score above ln(65504) = {:.2f} (largest {:.4g}; "
      "first: layer {} head {} position {}): a softmax that exponentiates in fp16 before "
      "subtracting the max would overflow there; llmctl subtracts the max in f32, so nothing "
      "overflows",
      r.rows, r.of_rows, kFp16SoftmaxLimit, r.largest, r.layer, r.head, r.pos);
}

std::string attn_stats_table(const AttnStatsCollector& c) {
  const bool capped = c.softcap() > 0.0;
  std::string s = fmt::format(
      "attention statistics: {} layers x {} heads over {} query tokens (scaled scores "
      "q.k/sqrt(head_dim) {}; entropy in nats, uniform = its maximum)\n",
      c.n_layers(), c.n_heads(), c.n_tokens(),
      capped ? fmt::format("after the soft-cap {:g} (raw_max: before it)", c.softcap())
             : std::string("before the softmax"));
  s += fmt::format("{:>5} {:>9} {:>4} {:>5} {:>9} {:>8} {:>7} {:>5} {:>5} {:>7} {:>7} {:>12}{}\n",
                   "layer", "max", "head", "pos", "min", "mean", "std", "nan", "inf", "entropy",
                   "uniform", "resid_absmax", capped ? fmt::format(" {:>9}", "raw_max") : "");
  const ResidualStats& emb = c.residual(-1);
  s += fmt::format("{:>5} {:>88}{}\n", "emb", cell(emb.abs_max, 12, 4),
                   emb.n_nonfinite > 0 ? fmt::format(" ({} non-finite)", emb.n_nonfinite) : "");
  for (int64_t l = 0; l < c.n_layers(); ++l) {
    const AttnHeadStats a = c.layer(l);
    const ResidualStats& r = c.residual(l);
    const bool any = a.n_finite > 0;
    s += fmt::format("{:>5} {} {:>4} {:>5} {} {} {} {:>5} {:>5} {} {} {}{}{}\n", l,
                     cell(any ? a.max : kNaN, 9, 3), any ? fmt::format("{}", a.max_head) : "-",
                     any ? fmt::format("{}", a.max_pos) : "-", cell(any ? a.min : kNaN, 9, 3),
                     cell(a.mean(), 8, 3), cell(a.std(), 7, 3), a.n_nan, a.n_inf,
                     cell(a.mean_entropy(), 7, 3), cell(a.mean_uniform_entropy(), 7, 3),
                     cell(r.abs_max, 12, 4),
                     capped ? " " + cell(a.n_raw_finite > 0 ? a.raw_max : kNaN, 9, 3) : "",
                     r.n_nonfinite > 0 ? fmt::format(" ({} non-finite)", r.n_nonfinite) : "");
  }
  s += "info: " + fp16_risk_text(c) + "\n";
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
                           {"text", attn_alert_text(*al, c.alert_threshold().value_or(0.0))}};
  }
  const auto first_bad = c.first_nonfinite_residual_layer();
  const Fp16Risk risk = c.fp16_risk();
  const bool risky = risk.rows > 0;
  const nlohmann::json fp16{{"limit", kFp16SoftmaxLimit},
                            {"rows", risk.rows},
                            {"of_rows", risk.of_rows},
                            {"largest", risky ? num(risk.largest) : nlohmann::json()},
                            {"layer", risky ? nlohmann::json(risk.layer) : nlohmann::json()},
                            {"head", risky ? nlohmann::json(risk.head) : nlohmann::json()},
                            {"position", risky ? nlohmann::json(risk.pos) : nlohmann::json()},
                            {"text", fp16_risk_text(c)}};
  return nlohmann::json{
      {"alert_threshold",
       c.alert_threshold() ? nlohmann::json(*c.alert_threshold()) : nlohmann::json()},
      {"softcap", c.softcap()},
      {"fp16_risk", fp16},
      {"n_layers", c.n_layers()},
      {"n_heads", c.n_heads()},
      {"n_tokens", c.n_tokens()},
      {"embeddings_abs_max", num(c.residual(-1).abs_max)},
      {"first_nonfinite_residual_layer", first_bad ? nlohmann::json(*first_bad) : nlohmann::json()},
      {"alert", alert},
      {"layers", layers}};
}

}  // namespace llmctl
