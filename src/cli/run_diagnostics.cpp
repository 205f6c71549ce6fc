// Per-sequence diagnostics of `llmctl run` (run_diagnostics.h).
#include "cli/run_diagnostics.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "diag/attn_stats_report.h"
#include "diag/moe_stats_report.h"

namespace llmctl::cli {

SequenceDiagnostics::SequenceDiagnostics(const RunOptions& opt, const RunSession& s)
    : acf_(opt.acf), stop_on_loop_(opt.stop_on_loop) {
  const ModelConfig& config = s.model.config;
  if (opt.attn_stats) {
    attn_.emplace(config.n_layers, config.n_heads, opt.attn_alert, config.attn_softcap);
    observers_.add(&*attn_);
  }
  if (opt.moe_stats) {  // open_run_session refused a model without experts
    moe_.emplace(config.n_layers, config.n_experts, config.n_experts_used);
    observers_.add(&*moe_);
  }
}

ForwardObserver* SequenceDiagnostics::observer() {
  return observers_.empty() ? nullptr : &observers_;
}

bool observes_forward_pass(const RunOptions& opt) { return opt.attn_stats || opt.moe_stats; }

void SequenceDiagnostics::attach(GenerateOptions& g) {
  if (acf_)
    g.on_pick_logits = [this](const float* logits, int32_t n_vocab) {
      top1_.push_back(top1_probability(logits, n_vocab));
    };
  if (stop_on_loop_) {
    g.on_token = [this, inner = std::move(g.on_token)](int32_t id) {
      if (inner) inner(id);
      loop_.push(id);
    };
    g.loop_detected = [this] { return loop_.detected(); };
  }
}

std::optional<AcfReport> SequenceDiagnostics::acf_report(const GenerateResult& r) {
  if (!acf_) return std::nullopt;
  // One value per generated token: a stopping EOS was picked too but is not in the ids.
  top1_.resize(std::min(top1_.size(), r.generated_ids.size()));
  return analyze_acf(r.generated_ids, top1_);
}

void SequenceDiagnostics::add_json(nlohmann::json& j, const std::optional<AcfReport>& acf) const {
  if (attn_) j["attn_stats"] = attn_stats_json(*attn_);
  if (moe_) j["moe_stats"] = moe_stats_json(*moe_);
  if (acf) j["acf"] = acf_json(*acf);
}

std::optional<std::string> SequenceDiagnostics::alert_text() const {
  if (!attn_ || !attn_->alert()) return std::nullopt;
  return attn_alert_text(*attn_->alert(), attn_->alert_threshold().value_or(0.0));
}

std::string SequenceDiagnostics::loop_stop_text() const {
  return fmt::format("loop detected (period {} tokens, repeating since generated token {})",
                     loop_.match().period, loop_.match().start);
}

}  // namespace llmctl::cli
