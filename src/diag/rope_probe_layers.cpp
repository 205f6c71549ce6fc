// rope-probe's view of per-layer RoPE (rope_probe.h): the layer groups that share a base,
// scale and window, and the one-line description the sweep and the reports print.
#include <fmt/format.h>

#include "diag/rope_probe.h"

namespace llmctl {

// arch.h's rule: a windowed layer of a pattern with a local base uses that base (and no
// scaling), even where it happens to equal the global one.
bool has_local_rope_base(const ModelConfig& c) {
  if (!(c.window.local_rope_base > 0.0)) return false;
  for (int64_t il = 0; il < c.n_layers; ++il)
    if (layer_windowed(c, il)) return true;
  return false;
}

std::vector<RopeLayerGroup> rope_layer_groups(const ModelConfig& c) {
  std::vector<RopeLayerGroup> groups;
  const bool local_base = has_local_rope_base(c);
  for (int64_t il = 0; il < c.n_layers; ++il) {
    RopeLayerGroup g;
    g.window = layer_window(c, il);
    g.freq_base = layer_rope_base(c, il);
    g.freq_scale = layer_rope_freq_scale(c, il);
    g.local = local_base && layer_windowed(c, il);
    bool found = false;
    for (RopeLayerGroup& have : groups)
      if (have.window == g.window && have.freq_base == g.freq_base &&
          have.freq_scale == g.freq_scale && have.local == g.local) {
        have.layers.push_back(il);
        found = true;
      }
    if (!found) {
      g.layers.push_back(il);
      groups.push_back(g);
    }
  }
  return groups;
}

std::string describe_rope(const ModelConfig& c) {
  const char* pairs = c.rope_type == RopeType::Normal ? "normal" : "neox";
  if (!has_local_rope_base(c))
    return fmt::format("{} pairs, base {:g}, scale {:g}", pairs, c.rope_freq_base,
                       c.rope_freq_scale);
  return fmt::format("{} pairs, global base {:g}, local base {:g}, global scale {:g}", pairs,
                     c.rope_freq_base, c.window.local_rope_base, c.rope_freq_scale);
}

}  // namespace llmctl
