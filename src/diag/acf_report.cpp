// The --acf table and JSON (acf_report.h).
#include "diag/acf_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace llmctl {

namespace {

nlohmann::json num(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

// The lags 1 .. max_lag without the dominant one, strongest first, at most `n`.
std::string next_lags(const SeriesAcf& s, size_t n) {
  std::vector<size_t> lags;
  for (size_t k = 1; k < s.acf.size(); ++k)
    if (std::isfinite(s.acf[k]) && static_cast<int64_t>(k) != s.period.lag) lags.push_back(k);
  std::stable_sort(lags.begin(), lags.end(),
                   [&](size_t a, size_t b) { return s.acf[a] > s.acf[b]; });
  std::string out;
  for (size_t i = 0; i < std::min(n, lags.size()); ++i)
    out += fmt::format("{}{} ({:.3f})", i == 0 ? "" : ", ", lags[i], s.acf[lags[i]]);
  return out.empty() ? "-" : out;
}

std::string row(const char* name, const SeriesAcf& s) {
  const bool any = s.period.lag > 0;
  return fmt::format("  {:<18} {:>6} {:>8}   {}\n", name,
                     any ? fmt::format("{}", s.period.lag) : "-",
                     any ? fmt::format("{:.3f}", s.period.strength) : "-", next_lags(s, 3));
}

nlohmann::json series_json(const SeriesAcf& s) {
  nlohmann::json acf = nlohmann::json::array();
  for (size_t k = 1; k < s.acf.size(); ++k) acf.push_back(num(s.acf[k]));
  return nlohmann::json{
      {"period", s.period.lag}, {"strength", num(s.period.strength)}, {"acf", acf}};
}

}  // namespace

AcfReport analyze_acf(const std::vector<int32_t>& ids, const std::vector<double>& top1) {
  AcfReport r;
  r.n_tokens = static_cast<int64_t>(ids.size());
  r.max_lag = r.n_tokens / 2;
  r.tokens.acf = token_acf(ids, r.max_lag);
  r.tokens.period = dominant_period(r.tokens.acf);
  r.top1.acf = pearson_acf(top1, static_cast<int64_t>(top1.size()) / 2);
  r.top1.period = dominant_period(r.top1.acf);
  r.top1_mean = top1.empty() ? std::nan("")
                             : std::accumulate(top1.begin(), top1.end(), 0.0) /
                                   static_cast<double>(top1.size());
  r.loop = first_loop(ids);
  r.loops_at_end = find_loop(ids).detected;
  return r;
}

std::string loop_text(const LoopMatch& m) {
  if (!m.detected)
    return fmt::format(
        "none (at no point did {:.0f}% of the last max(2P, {}) tokens equal the "
        "token P before, for any period P)",
        kLoopMatchRate * 100.0, kMinLoopSpan);
  return fmt::format(
      "detected: period {} tokens, repeating from generated token {}, found at "
      "token {} ({:.0f}% of the last {} tokens equal the token {} before)",
      m.period, m.start, m.at, m.match_rate * 100.0, m.span, m.period);
}

std::string acf_table(const AcfReport& r) {
  std::string s = fmt::format(
      "autocorrelation of {} generated tokens (lags 1..{}; tokens: Cohen's kappa of id[t] == "
      "id[t-lag], 0 = chance, 1 = always; top-1: Pearson ACF, mean {})\n",
      r.n_tokens, r.max_lag,
      std::isfinite(r.top1_mean) ? fmt::format("{:.3f}", r.top1_mean) : std::string("-"));
  s += fmt::format("  {:<18} {:>6} {:>8}   {}\n", "series", "period", "strength",
                   "next strongest lags");
  s += row("token ids", r.tokens);
  s += row("top-1 probability", r.top1);
  s += "  loop: " + loop_text(r.loop);
  if (r.loop.detected)
    s += r.loops_at_end ? "; still looping at the end" : "; broken out of by the end";
  s += "\n";
  return s;
}

nlohmann::json acf_json(const AcfReport& r) {
  nlohmann::json top1 = series_json(r.top1);
  top1["mean"] = num(r.top1_mean);
  return nlohmann::json{{"n_tokens", r.n_tokens},
                        {"max_lag", r.max_lag},
                        {"tokens", series_json(r.tokens)},
                        {"top1_prob", top1},
                        {"loop",
                         {{"detected", r.loop.detected},
                          {"period", r.loop.period},
                          {"span", r.loop.span},
                          {"match_rate", r.loop.match_rate},
                          {"start", r.loop.start},
                          {"detected_at", r.loop.at},
                          {"at_end", r.loops_at_end}}}};
}

}  // namespace llmctl
