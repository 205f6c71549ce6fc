#pragma once
// Rendering of a MoeStatsCollector (moe_stats.h): the per-layer table `llmctl run --moe-stats`
// prints on stderr, the one-line summary of an -i turn, and the --json object.

#include <nlohmann/json.hpp>
#include <string>

#include "diag/moe_stats.h"

namespace llmctl {

// A header line, then one row per layer with experts: tokens, mean entropy (next to its
// maximum ln(n_expert)), top-k mass, max_load, the count of experts never chosen and, for up to
// 16 experts, the token count of each; with more experts the counts follow in a block of
// lines of 16. Then one "never chosen:" line per layer that has such experts. Ends with "\n".
std::string moe_stats_table(const MoeStatsCollector& c);
// "T tokens, top-K of E: router entropy H nats (uniform U), top-k mass M, N (layer, expert)
// pairs never chosen" over every layer with experts (means over layers), no newline.
std::string moe_stats_line(const MoeStatsCollector& c);

// {"n_layers", "n_experts", "k", "n_tokens", "uniform_entropy" (ln n_experts),
//  "layers": [{layer, tokens, entropy, top_k_mass, max_load, nonfinite_rows,
//              expert_tokens: [n_experts counts], never_chosen: [experts]}]}
// with one entry per layer with experts (dense layers are left out); statistics that do not
// exist (no finite row) are null.
nlohmann::json moe_stats_json(const MoeStatsCollector& c);

}  // namespace llmctl
