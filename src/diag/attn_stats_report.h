#pragma once
// Rendering of an AttnStatsCollector (attn_stats.h): the per-layer table `llmctl run
// --attn-stats` prints on stderr, the one-line alert, and the --json object.

#include <nlohmann/json.hpp>
#include <string>

#include "diag/attn_stats.h"

namespace llmctl {

// The per-layer table (heads merged; "head"/"pos" say where the layer's max score is), with
// a header line, the residual abs-max per layer (the embeddings as "emb"), a raw_max column
// (before the soft-cap) when the model has one, and an "info:" line (fp16_risk_text). Ends
// with "\n".
std::string attn_stats_table(const AttnStatsCollector& c);
// The fp16-softmax risk in one sentence (information, not an alert).
std::string fp16_risk_text(const AttnStatsCollector& c);

// One line without a prefix or newline, e.g.
//   "layer 3 head 5 position 17 (token id 123): scaled score 16.25 > --attn-alert 15"
//   "layer 2 head 0 position 4 (token id 9): 3 NaN/Inf scores"
//   "residual after layer 4 position 8 (token id 1): 288 NaN/Inf values"
std::string attn_alert_text(const AttnAlert& a, double threshold);

// {"alert_threshold" (null: no score threshold, only non-finite values alert), "softcap"
//  (the model's attention soft-cap, 0: none), "n_layers", "n_heads", "n_tokens",
//  "embeddings_abs_max", "first_nonfinite_residual_layer" (null, -1 embeddings, or a layer),
//  "alert" (null or {kind, layer, head, position, token, value, text}),
//  "fp16_risk": {limit (ln 65504), rows, of_rows, largest, layer, head, position, text}
//               (information, never an alert: rows whose max score exceeds the limit),
//  "layers": [{layer, max, max_head, max_position, min, mean, std, nan, inf, entropy,
//              uniform_entropy, raw_max, raw_min, raw_nonfinite, fp16_risk_rows,
//              residual_abs_max, residual_nonfinite,
//              "heads": [{head, max, max_position, min, mean, std, nan, inf, entropy,
//                         uniform_entropy, raw_max, raw_min, raw_nonfinite, fp16_risk_rows,
//                         queries}]}]}
// max .. inf describe the scores the softmax receives (after a soft-cap); raw_* the scores
// before the cap (the same without one). Statistics that do not exist (no finite score) are
// null.
nlohmann::json attn_stats_json(const AttnStatsCollector& c);

}  // namespace llmctl
