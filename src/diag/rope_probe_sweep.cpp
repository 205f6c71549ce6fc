// rope-probe's configuration sweep (rope_probe.h): the reference text's mean NLL under the
// configured RoPE and under variants a wrong GGUF conversion could have produced.
#include <fmt/format.h>

#include "core/error.h"
#include "diag/rope_probe.h"
#include "diag/rope_probe_runner.h"

namespace llmctl {

namespace {

std::string describe(const ModelConfig& c) {
  return fmt::format("{} pairs, base {:g}, scale {:g}",
                     c.rope_type == RopeType::Normal ? "normal" : "neox", c.rope_freq_base,
                     c.rope_freq_scale);
}

}  // namespace

SweepResult probe_sweep(const ModelConfig& c, const ModelWeights& w, Backend& b,
                        const std::vector<int32_t>& ids) {
  std::vector<std::pair<std::string, ModelConfig>> variants;
  variants.emplace_back("configured", c);
  ModelConfig v = c;
  v.rope_freq_base = c.rope_freq_base * 10;
  variants.emplace_back("base x10", v);
  v = c;
  v.rope_freq_base = c.rope_freq_base / 10;
  variants.emplace_back("base /10", v);
  v = c;
  v.rope_type = c.rope_type == RopeType::Normal ? RopeType::Neox : RopeType::Normal;
  variants.emplace_back(v.rope_type == RopeType::Neox ? "neox pairs" : "normal pairs", v);
  v = c;
  if (c.rope_freq_scale != 1.0) {
    v.rope_scaling_type = "";
    v.rope_scaling_factor = 1.0;
    v.rope_freq_scale = 1.0;
    variants.emplace_back("scaling off", v);
  } else {
    v.rope_scaling_type = "linear";
    v.rope_scaling_factor = 2.0;
    v.rope_freq_scale = 0.5;
    variants.emplace_back("linear x2", v);
  }
  SweepResult r;
  r.n_tokens = static_cast<int64_t>(ids.size()) - 1;
  for (const auto& [name, config] : variants) {
    RopeRunner run(config, w, b, static_cast<int64_t>(ids.size()));
    SweepRow row;
    row.name = name;
    row.detail = describe(config);
    row.nll = run.mean_nll(ids);
    row.configured = name == "configured";
    r.rows.push_back(row);
  }
  return r;
}

}  // namespace llmctl
