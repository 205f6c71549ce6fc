// ModelConfig: parameter counts from shapes, model shapes from a Hugging Face config.json, and
// which reader a model argument goes to (GGUF metadata: the engine's, cli/kvplan_model.h).
#include "plan/model_config.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/edit_distance.h"
#include "core/sliding_window.h"
#include "core/error.h"
#include "io/json_error.h"

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
    }
    p.linear += attn;
    active += attn;
    if (c.layer_is_moe(l)) {
      const int64_t expert = 3 * d * c.n_ff_expert;  // gate, up, down
      const int64_t router = d * c.n_experts;
      p.linear += router + c.n_experts * expert + c.n_shared_experts * expert;
      p.expert_linear += c.n_experts * expert;
      active += router + (c.n_experts_used + c.n_shared_experts) * expert;
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

// --------------------------------------------------------------------------------------------
// Hugging Face config.json
// --------------------------------------------------------------------------------------------

namespace {

int64_t json_int(const nlohmann::json& j, const char* key, int64_t fallback) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (it->is_boolean()) return it->get<bool>() ? 1 : 0;
  if (!it->is_number()) return fallback;
  return it->get<int64_t>();
}

}  // namespace

ModelConfig model_from_config_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FileError(path, "cannot open file");
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw FileError(path, fmt::format("not valid JSON: {}", json_error_text(e.what())));
  }
  if (!root.is_object()) throw FileError(path, "expected a JSON object");
  const nlohmann::json& j = (!root.contains("hidden_size") && root.contains("text_config")) ? root["text_config"] : root;
  auto need = [&](const char* key) {
    const int64_t v = json_int(j, key, -1);
    if (v <= 0) throw FileError(path, fmt::format("missing or invalid field '{}'", key), FileError::kNoOffset,
                                "kvplan needs the model's shape fields (hidden_size, num_hidden_layers, ...)");
    return v;
  };
  ModelConfig c;
  c.name = path;
  c.source = "config.json " + path;
  c.arch = j.value("model_type", std::string("llama"));
  c.label = c.arch;
  if (j.contains("_name_or_path") && j["_name_or_path"].is_string()) c.label = j["_name_or_path"].get<std::string>();
  c.n_embd = need("hidden_size");
  c.n_layers = need("num_hidden_layers");
  c.n_heads = need("num_attention_heads");
  c.n_vocab = need("vocab_size");
  c.n_kv_heads = json_int(j, "num_key_value_heads", c.n_heads);
  c.max_ctx = json_int(j, "max_position_embeddings", 0);
  const bool gemma = c.arch.rfind("gemma", 0) == 0;
  c.tied_embeddings = json_int(j, "tie_word_embeddings", gemma ? 1 : 0) != 0;
  c.qkv_bias = c.arch == "qwen2" || json_int(j, "attention_bias", 0) != 0;
  c.qk_norm = c.arch == "qwen3" || c.arch == "qwen3_moe";
  if (gemma) c.norms_per_layer = 4;
  // MoE: Mixtral names the expert count num_local_experts and its expert size intermediate_size.
  c.n_experts = json_int(j, "num_local_experts", json_int(j, "num_experts", json_int(j, "n_routed_experts", 0)));
  if (c.n_experts > 0) {
    c.n_experts_used = need("num_experts_per_tok");
    c.n_shared_experts = json_int(j, "n_shared_experts", 0);
    c.n_dense_layers = json_int(j, "first_k_dense_replace", 0);
    c.n_ff_expert = json_int(j, "moe_intermediate_size", 0);
    if (c.n_ff_expert <= 0) c.n_ff_expert = need("intermediate_size");
    c.n_ff = c.n_dense_layers > 0 ? need("intermediate_size") : json_int(j, "intermediate_size", 0);
  } else {
    c.n_ff = need("intermediate_size");
  }
  // MLA
  c.kv_lora_rank = json_int(j, "kv_lora_rank", 0);
  if (c.is_mla()) {
    c.q_lora_rank = json_int(j, "q_lora_rank", 0);
    c.qk_rope_dim = need("qk_rope_head_dim");
    c.qk_nope_dim = need("qk_nope_head_dim");
    c.v_head_dim = need("v_head_dim");
    c.head_dim = c.qk_nope_dim + c.qk_rope_dim;
    c.n_kv_heads = c.n_heads;
  } else {
    // head_dim from the configuration when it says so (Qwen3, Gemma-2), else hidden / heads.
    c.head_dim = json_int(j, "head_dim", 0);
    if (c.head_dim <= 0) {
      if (c.n_embd % c.n_heads != 0)
        throw FileError(path, "missing field 'head_dim' (hidden_size is not a multiple of num_attention_heads)");
      c.head_dim = c.n_embd / c.n_heads;
    }
  }
  // Sliding windows: Qwen2 carries sliding_window but only uses it with use_sliding_window;
  // Phi-3 lists one that the engines do not apply.
  const bool swa_enabled = json_int(j, "use_sliding_window", 1) != 0 && c.arch != "phi3";
  if (swa_enabled) c.sliding_window = json_int(j, "sliding_window", 0);
  if (c.sliding_window > 0) {
    if (const auto lt = j.find("layer_types"); lt != j.end() && lt->is_array() && !lt->empty()) {
      c.swa_period = 0;
      for (size_t i = 0; i < lt->size(); ++i)
        if ((*lt)[i] == "full_attention") { c.swa_period = static_cast<int64_t>(i) + 1; break; }
    } else if (c.arch == "gemma2") {
      c.swa_period = 2;
    }
  }
  if (c.n_kv_heads <= 0 || c.n_heads % c.n_kv_heads != 0)
    throw FileError(path, fmt::format("num_key_value_heads {} does not divide num_attention_heads {}",
                                      c.n_kv_heads, c.n_heads));
  return c;
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
