// ModelConfig: parameter counts from shapes, and which reader a model argument goes to (the
// engine's GGUF and config.json readers, passed in by the CLI: cli/kvplan_model.h).
#include "plan/model_config.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <filesystem>
#include <fmt/format.h>

#include "core/edit_distance.h"
#include "core/sliding_window.h"
#include "core/error.h"

namespace llmctl::plan {

int64_t ModelConfig::layer_window(int64_t l) const {
  const WindowPattern p{swa_period > 0 ? WindowLayers::AllButEveryPeriod : WindowLayers::All,
                        static_cast<int32_t>(swa_period), 0.0};
  return sliding_window > 0 && window_pattern_has(p, l) ? sliding_window : 0;
}

ParamCounts count_params(const ModelConfig& c) {
  ParamCounts p;
  const int64_t d = c.n_embd;
  p.embedding = c.n_vocab * d;
  p.lm_head = c.tied_embeddings ? 0 : c.n_vocab * d;
  int64_t active = c.n_vocab * d;  // the lm_head matmul runs even when tied
  for (int64_t l = 0; l < c.n_layers; ++l) {
    int64_t attn = 0;
    if (c.is_mla()) {
      const int64_t qk = c.qk_nope_dim + c.qk_rope_dim;
      attn += c.q_lora_rank > 0 ? d * c.q_lora_rank + c.q_lora_rank * c.n_heads * qk : d * c.n_heads * qk;
      attn += d * (c.kv_lora_rank + c.qk_rope_dim);                    // kv_a (latent + rope key)
      attn += c.kv_lora_rank * c.n_heads * (c.qk_nope_dim + c.v_dim());  // kv_b
      attn += c.n_heads * c.v_dim() * d;                                 // o
      p.small += c.kv_lora_rank + c.q_lora_rank;                         // latent norms
    } else {
      attn += d * c.n_heads * c.head_dim + d * c.n_kv_heads * (c.head_dim + c.v_dim());
      attn += c.n_heads * c.v_dim() * d;
      if (c.qkv_bias) p.small += c.n_heads * c.head_dim + c.n_kv_heads * (c.head_dim + c.v_dim());
      if (c.qk_norm) p.small += 2 * c.head_dim;
      if (c.o_bias) p.small += d;
      if (c.attn_sinks) p.small += c.n_heads;
    }
    p.linear += attn;
    active += attn;
    if (c.layer_is_moe(l)) {
      const int64_t expert = 3 * d * c.n_ff_expert;  // gate, up, down
      const int64_t router = d * c.n_experts;
      const int64_t shared = 3 * d * c.shared_ff() + (c.n_ff_shared > 0 ? d : 0);  // + its gate
      p.linear += router + c.n_experts * expert + shared;
      p.expert_linear += c.n_experts * expert;
      active += router + c.n_experts_used * expert + shared;
      if (c.moe_biases) p.small += c.n_experts * (1 + 2 * c.n_ff_expert + d);
    } else {
      p.linear += 3 * d * c.n_ff;
      active += 3 * d * c.n_ff;
    }
    p.small += c.norms_per_layer * d;
  }
  p.small += d;  // final norm
  p.active_matmul = active;
  return p;
}

std::string lowercase(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}


std::vector<std::string> closest_names(const std::string& query, const std::vector<std::string>& names,
                                       size_t n) {
  const std::string q = lowercase(query);
  std::vector<std::pair<size_t, std::string>> scored;
  // A typed prefix counts almost as a match ("h10" -> "h100-sxm").
  for (const std::string& name : names) {
    const std::string l = lowercase(name);
    const size_t prefix = l.size() > q.size() ? edit_distance(q, l.substr(0, q.size())) + 1 : SIZE_MAX;
    scored.emplace_back(std::min(edit_distance(q, l), prefix), name);
  }
  std::stable_sort(scored.begin(), scored.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<std::string> out;
  for (size_t i = 0; i < scored.size() && i < n; ++i) out.push_back(scored[i].second);
  return out;
}

ModelConfig load_model(const std::string& name_or_file, const ModelFileReaders& readers) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(name_or_file, ec)) {
    const fs::path cfg = fs::path(name_or_file) / "config.json";
    if (!fs::exists(cfg, ec)) throw FileError(name_or_file, "directory has no config.json");
    return readers.config_json(cfg.string());
  }
  if (fs::is_regular_file(name_or_file, ec)) {
    const std::string lower = lowercase(name_or_file);
    if (lower.size() >= 5 && lower.compare(lower.size() - 5, 5, ".json") == 0)
      return readers.config_json(name_or_file);
    return readers.gguf(name_or_file);
  }
  const std::string lower = lowercase(name_or_file);
  for (const char* ext : {".gguf", ".json"}) {
    const std::string e = ext;
    if (lower.size() > e.size() && lower.compare(lower.size() - e.size(), e.size(), e) == 0)
      throw FileError(name_or_file, "no such file", FileError::kNoOffset,
                      "give an existing .gguf or config.json, or a catalog name (--list-models)");
  }
  return find_model(name_or_file);
}

}  // namespace llmctl::plan
