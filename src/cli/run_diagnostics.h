#pragma once
// The diagnostics of one generated sequence in `llmctl run` (--attn-stats, --moe-stats, --acf,
// --stop-on-loop): one per single prompt, per --batch request, per -i turn. It owns what they
// collect (the attention and router statistics, the top-1 probability of each pick, the loop
// test) and renders the per-sequence results, so the three modes report the same things the
// same way.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/run_session.h"
#include "diag/acf_report.h"
#include "diag/attn_stats.h"
#include "diag/moe_stats.h"
#include "diag/observer_fanout.h"

namespace llmctl::cli {

class SequenceDiagnostics {
 public:
  SequenceDiagnostics(const RunOptions& opt, const RunSession& s);
  // attach() hands out callbacks that point at this object.
  SequenceDiagnostics(const SequenceDiagnostics&) = delete;
  SequenceDiagnostics& operator=(const SequenceDiagnostics&) = delete;

  // The observer to set on the forward pass (directly, or bound to the sequence's id in a
  // SequenceRouter): the collectors that are on, behind one fanout; null without --attn-stats
  // and --moe-stats.
  ForwardObserver* observer();
  const AttnStatsCollector* attn() const { return attn_ ? &*attn_ : nullptr; }
  const MoeStatsCollector* moe() const { return moe_ ? &*moe_ : nullptr; }

  // Adds to g what --acf and --stop-on-loop need: the top-1 probability of each pick and the
  // loop test after every token (wrapping g.on_token, so set that first). Nothing when off.
  void attach(GenerateOptions& g);

  // After generation: the --acf report of r's tokens (nullopt without --acf).
  std::optional<AcfReport> acf_report(const GenerateResult& r);
  // Sets j["attn_stats"], j["moe_stats"] and j["acf"] for the diagnostics that are on.
  void add_json(nlohmann::json& j, const std::optional<AcfReport>& acf) const;
  // The alert line's text (attn_alert_text) when there was one.
  std::optional<std::string> alert_text() const;
  // "loop detected (period P tokens, repeating since generated token S)", for the note of
  // a sequence that --stop-on-loop ended.
  std::string loop_stop_text() const;

 private:
  std::optional<AttnStatsCollector> attn_;
  std::optional<MoeStatsCollector> moe_;
  ObserverFanout observers_;  // attn_ and moe_, those that are on
  bool acf_ = false;
  bool stop_on_loop_ = false;
  std::vector<double> top1_;  // --acf: top-1 probability of each pick's raw logits
  LoopDetector loop_;         // --stop-on-loop
};

// Whether a diagnostic observes every token the forward pass computes (--attn-stats,
// --moe-stats): --batch then computes every prompt in full, without the prefix cache.
bool observes_forward_pass(const RunOptions& opt);

}  // namespace llmctl::cli
