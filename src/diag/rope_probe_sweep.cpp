// rope-probe's configuration sweep (rope_probe.h): the reference text's mean NLL under the
// configured RoPE and under variants a wrong GGUF conversion could have produced.
#include <fmt/format.h>

#include "core/error.h"
#include "diag/rope_probe.h"
#include "diag/rope_probe_runner.h"

namespace llmctl {

namespace {

// The variants a wrong conversion could have produced. With a local RoPE base (Gemma 3) each
// group's base is varied on its own: the 3 global layers of an 18-layer Gemma 3 move the NLL
// far less than its 15 local ones, and a probe of "the base" must say whose base it is.
std::vector<std::pair<std::string, ModelConfig>> sweep_variants(const ModelConfig& c) {
  std::vector<std::pair<std::string, ModelConfig>> variants;
  variants.emplace_back("configured", c);
  const bool local = has_local_rope_base(c);
  const std::string global_name = local ? "global base" : "base";
  ModelConfig v = c;
  v.rope_freq_base = c.rope_freq_base * 10;
  variants.emplace_back(global_name + " x10", v);
  v = c;
  v.rope_freq_base = c.rope_freq_base / 10;
  variants.emplace_back(global_name + " /10", v);
  if (local) {
    v = c;
    v.window.local_rope_base = c.window.local_rope_base * 10;
    variants.emplace_back("local base x10", v);
    v = c;
    v.window.local_rope_base = c.window.local_rope_base / 10;
    variants.emplace_back("local base /10", v);
  }
  v = c;
  v.rope_type = c.rope_type == RopeType::Normal ? RopeType::Neox : RopeType::Normal;
  variants.emplace_back(v.rope_type == RopeType::Neox ? "neox pairs" : "normal pairs", v);
  // Linear scaling applies where the file's scaling does: the global layers (arch.h
  // layer_rope_freq_scale).
  const std::string scope = local ? " (global layers)" : "";
  v = c;
  if (c.rope_freq_scale != 1.0) {
    v.rope_scaling_type = "";
    v.rope_scaling_factor = 1.0;
    v.rope_freq_scale = 1.0;
    variants.emplace_back("scaling off" + scope, v);
  } else {
    v.rope_scaling_type = "linear";
    v.rope_scaling_factor = 2.0;
    v.rope_freq_scale = 0.5;
    variants.emplace_back("linear x2" + scope, v);
  }
  return variants;
}

}  // namespace

SweepResult probe_sweep(const ModelConfig& c, const ModelWeights& w, Backend& b,
                        const std::vector<int32_t>& ids) {
  const std::vector<std::pair<std::string, ModelConfig>> variants = sweep_variants(c);
  SweepResult r;
  r.n_tokens = static_cast<int64_t>(ids.size()) - 1;
  for (const auto& [name, config] : variants) {
    RopeRunner run(config, w, b, static_cast<int64_t>(ids.size()));
    SweepRow row;
    row.name = name;
    row.detail = describe_rope(config);
    row.nll = run.mean_nll(ids);
    row.configured = name == "configured";
    r.rows.push_back(row);
  }
  return r;
}

}  // namespace llmctl
