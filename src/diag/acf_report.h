#pragma once
// The --acf report of `llmctl run`: both autocorrelation series of a generation, their
// dominant periods and the loop verdict (acf.h), as a table for stderr and a --json object.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "diag/acf.h"

namespace llmctl {

struct SeriesAcf {
  std::vector<double> acf;  // index = lag, 0 .. max_lag
  Period period;
};

struct AcfReport {
  int64_t n_tokens = 0;
  int64_t max_lag = 0;  // n_tokens / 2
  SeriesAcf tokens;     // Cohen's kappa of the ids
  SeriesAcf top1;       // Pearson ACF of the top-1 probabilities
  double top1_mean = 0.0;
  LoopMatch loop;             // first_loop(): the first point where the loop test passed
  bool loops_at_end = false;  // find_loop() on the whole generation
};

// ids and top1 of the same picks (top1 may be empty, e.g. when no logits were seen; it is
// then reported as null).
AcfReport analyze_acf(const std::vector<int32_t>& ids, const std::vector<double>& top1);

// Header, one row per series (period, strength, the next strongest lags) and the loop line.
// Ends with "\n".
std::string acf_table(const AcfReport& r);

// {"n_tokens", "max_lag",
//  "tokens": {"period", "strength", "acf": [lag 1 .. max_lag]},
//  "top1_prob": {"mean", "period", "strength", "acf": [...]},
//  "loop": {"detected", "period", "start", "detected_at", "span", "match_rate",
//           "at_end"}}
// (non-finite -> null; period 0 and strength null when there is none; "detected_at": the
// number of generated tokens when the test first passed, "at_end": whether the generation
// still loops at its end)
nlohmann::json acf_json(const AcfReport& r);

// One line about the loop verdict (without prefix or newline).
std::string loop_text(const LoopMatch& m);

}  // namespace llmctl
