#pragma once
// rope-probe's --check, --json and --baseline: pass/fail rules over a RopeProbeReport, its
// JSON form, and the comparison of that JSON with a saved one.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "diag/rope_probe.h"

namespace llmctl {

// Defaults measured on stories260K (CPU, f32 KV) with wide margins; see the README section.
struct RopeThresholds {
  double max_shift_kl = 1e-6;      // per offset, the largest per-position KL (nats)
  double max_shift_dlogit = 1e-3;  // per offset, max |logit_0 - logit_offset|
  double min_ablation_kl = 0.1;    // mean KL of all-zero positions against normal (nats)
  double sweep_margin = 0.0;       // configured NLL may exceed the best variant's by this
};

struct DriftTolerance {
  double rel = 0.02;  // |current - baseline| <= abs + rel * |baseline|
  double abs = 1e-4;
};

// One line per failed check ("shift: ...", "ablation: ...", "sweep: ..."); empty: all pass.
std::vector<std::string> check_rope_probe(const RopeProbeReport& r, const RopeThresholds& t);

// The report as JSON (every number the tables show; "failures" holds check_rope_probe's lines).
nlohmann::json rope_probe_json(const RopeProbeReport& r, const RopeThresholds& t);

// One line per number of `baseline` (a saved rope_probe_json) that `current` lacks or that
// moved beyond the tolerance, named by its path ("sweep.rows[0].nll"). The "thresholds" and
// "failures" members are not compared (they are settings and verdicts, not measurements).
std::vector<std::string> compare_rope_baseline(const nlohmann::json& current,
                                               const nlohmann::json& baseline,
                                               const DriftTolerance& tol);

}  // namespace llmctl
