// The architecture table's lookups, the row -> config copy and the check of what the forward
// pass implements (arch.h).
#include "model/arch.h"

#include <fmt/format.h>

#include <cmath>

#include "core/error.h"
#include "model/config.h"
#include "model/weights.h"

namespace llmctl {

const ArchRow* find_arch_by_gguf(const std::string& gguf_name, const ArchTable& table) {
  for (const ArchRow& row : table)
    if (gguf_name == row.gguf_name) return &row;
  return nullptr;
}

std::optional<WindowPattern> arch_window_pattern(const std::string& gguf_name) {
  const ArchRow* row = find_arch_by_gguf(gguf_name);
  if (row == nullptr) return std::nullopt;
  return row->window;
}

const ArchRow* find_arch_by_hf(const std::string& hf_class, const ArchTable& table) {
  for (const ArchRow& row : table)
    for (const char* name : row.hf_classes)
      if (name != nullptr && hf_class == name) return &row;
  return nullptr;
}

std::string arch_gguf_names(const ArchTable& table) {
  std::vector<std::string> names;
  for (const ArchRow& row : table) names.emplace_back(row.gguf_name);
  return fmt::format("{}", fmt::join(names, ", "));
}

std::string arch_hf_classes(const ArchTable& table) {
  std::vector<std::string> names;
  for (const ArchRow& row : table)
    for (const char* name : row.hf_classes)
      if (name != nullptr) names.emplace_back(name);
  return fmt::format("{}", fmt::join(names, ", "));
}

void apply_arch_row(const ArchRow& row, ModelConfig& c) {
  c.arch = row.gguf_name;
  c.has_qkv_bias = row.qkv_bias;
  c.qk_norm = row.qk_norm;
  c.norms = row.norms;
  c.activation = row.activation;
  c.fused_qkv = row.fused_qkv;
  c.fused_gate_up = row.fused_gate_up;
  c.embd_scale =
      row.embd_scale == EmbedScale::SqrtNEmbd ? std::sqrt(static_cast<double>(c.n_embd)) : 1.0;
  c.attn_softcap = row.attn_softcap;
  c.final_softcap = row.final_softcap;
  c.window = row.window;
  c.moe_renormalize = row.moe.renormalize;
  c.moe_gated_shared_expert = row.moe.gated_shared_expert;
  c.moe_gating = row.moe.gating;
  c.moe_router_bias = row.moe.router_bias;
  c.moe_expert_biases = row.moe.expert_biases;
  c.has_out_bias = row.attn_out_bias;
  c.has_attn_sinks = row.attn_sinks;
  c.ffn_norm_named_post_attention = row.ffn_norm_named_post_attention;
  if (row.embd_per_head_scale_layers > 0 && c.n_layers == row.embd_per_head_scale_layers)
    c.attn_scale = 1.0 / std::sqrt(static_cast<double>(c.n_embd / c.n_heads));
  // A row with file_scales takes its four scales from the file: the readers set them after
  // this (embd_scale stays 1 here).
}

std::vector<std::string> unimplemented_math(const ModelConfig& c) {
  // Fused QKV and gate/up run as row views of the fused matrix (split_fused_layer); biases
  // of a fused projection have no tensor in kLayerTensors yet.
  std::vector<std::string> missing;
  if (c.fused_qkv && c.has_qkv_bias) missing.emplace_back("biases on a fused QKV projection");
  return missing;
}

std::string unimplemented_message(const ModelConfig& c) {
  const std::vector<std::string> missing = unimplemented_math(c);
  if (missing.empty()) return {};
  std::string list = missing.front();
  for (size_t i = 1; i < missing.size(); ++i)
    list += (i + 1 == missing.size() ? " and " : ", ") + missing[i];
  return fmt::format(
      "architecture '{}' needs {}, which llmctl's forward pass does not "
      "implement yet",
      c.arch, list);
}

void require_implemented(const ModelConfig& c) {
  const std::string message = unimplemented_message(c);
  if (!message.empty()) throw Error(message);
}

// ---- per-layer attention options --------------------------------------------------------

bool layer_windowed(const ModelConfig& c, int64_t il) {
  return c.sliding_window > 0 && window_pattern_has(c.window, il);
}

int32_t layer_window(const ModelConfig& c, int64_t il) {
  return layer_windowed(c, il) ? static_cast<int32_t>(c.sliding_window) : 0;
}

std::vector<int32_t> layer_windows(const ModelConfig& c) {
  std::vector<int32_t> w;
  for (int64_t il = 0; il < c.n_layers; ++il) w.push_back(layer_window(c, il));
  return w;
}

bool layer_rope_local(const ModelConfig& c, int64_t il) {
  return layer_windowed(c, il) && c.window.local_rope_base > 0.0;
}

double layer_rope_base(const ModelConfig& c, int64_t il) {
  return layer_rope_local(c, il) ? c.window.local_rope_base : c.rope_freq_base;
}

double layer_rope_freq_scale(const ModelConfig& c, int64_t il) {
  return layer_rope_local(c, il) ? 1.0 : c.rope_freq_scale;
}

}  // namespace llmctl
