// kvplan's planning input from the engine's readers (kvplan_model.h).
#include "cli/kvplan_model.h"

#include <fmt/format.h>

#include <optional>

#include "core/error.h"
#include "io/gguf.h"
#include "io/gguf_format.h"
#include "model/arch.h"
#include "model/config.h"
#include "model/hf_config.h"

namespace llmctl::cli {

namespace {

// The numbers both readers' shapes give alike: counts, head sizes, MLP and vocabulary sizes,
// the context, MoE, and MLA (one latent per token: n_kv_heads = n_heads).
plan::ModelConfig plan_numbers(const ModelShape& s, const std::string& arch) {
  plan::ModelConfig c;
  c.arch = arch;
  c.label = s.name.empty() ? arch : s.name;
  c.n_layers = s.n_layers;
  c.n_embd = s.n_embd;
  c.n_heads = s.n_heads;
  c.n_kv_heads = s.n_kv_heads;
  c.head_dim = s.head_dim;
  c.v_head_dim = s.v_head_dim;
  c.n_ff = s.n_ff;
  c.n_vocab = s.n_vocab;
  c.max_ctx = s.n_ctx_train;
  c.n_experts = s.n_experts;
  c.n_experts_used = s.n_experts_used;
  c.n_shared_experts = s.n_shared_experts;
  c.n_ff_expert = s.n_ff_expert;
  c.n_ff_shared = s.n_ff_shared;
  c.n_dense_layers = s.n_dense_layers;
  c.kv_lora_rank = s.kv_lora_rank;
  if (c.is_mla()) {
    c.q_lora_rank = s.q_lora_rank;
    c.qk_rope_dim = s.n_rot;
    c.qk_nope_dim = s.head_dim - s.n_rot;
    c.n_kv_heads = c.n_heads;
  }
  return c;
}

}  // namespace

plan::ModelConfig kvplan_model_from_gguf(const GgufFile& f) {
  const ModelShape s = read_gguf_shape(f);
  if (s.kv_lora_rank > 0 && !s.n_rot_given)
    throw FileError(f.path(),
                    fmt::format("missing metadata key '{}.rope.dimension_count'", s.arch));
  plan::ModelConfig c = plan_numbers(s, s.arch);
  c.name = f.path();
  c.source = "GGUF metadata of " + f.path();
  c.tied_embeddings = !s.has_output;
  c.qkv_bias = s.has_q_bias;
  c.qk_norm = s.has_q_norm;
  if (c.arch == "gemma2") c.norms_per_layer = 4;
  if (const ArchRow* row = find_arch_by_gguf(c.arch)) {  // what the engine's row says
    c.o_bias = row->attn_out_bias;
    c.attn_sinks = row->attn_sinks;
    c.moe_biases = row->moe.expert_biases;
  }
  c.sliding_window = s.sliding_window.value_or(0);
  if (const std::optional<WindowPattern> p = arch_window_pattern(c.arch)) {
    if (p->layers == WindowLayers::None) c.sliding_window = 0;  // the engine ignores the key
    if (p->layers == WindowLayers::AllButEveryPeriod)
      c.swa_period = s.sliding_window_period.value_or(p->period);
  }
  for (const GgufTensorInfo& t : f.tensors()) c.file_weight_bytes += t.n_bytes;
  c.file_params = gguf_parameter_count(f);
  return c;
}

plan::ModelConfig kvplan_model_from_config_json(const std::string& path) {
  const ModelShape s = read_hf_shape(path);
  plan::ModelConfig c = plan_numbers(s, s.arch.empty() ? "llama" : s.arch);
  c.name = path;
  c.source = "config.json " + path;
  // The engine's row when model_type names one (its switches), else kvplan's rules.
  if (const ArchRow* row = find_arch_by_gguf(c.arch)) {
    c.tied_embeddings = s.tie_word_embeddings.value_or(row->hf_tied_default);
    c.qkv_bias = row->qkv_bias || s.attention_bias;
    c.qk_norm = row->qk_norm != QkNorm::None;
    c.norms_per_layer = row->norms == NormPlacement::Both ? 4 : 2;
  } else {
    const bool gemma = c.arch.rfind("gemma", 0) == 0;
    c.tied_embeddings = s.tie_word_embeddings.value_or(gemma);
    c.qkv_bias = c.arch == "qwen2" || s.attention_bias;
    c.qk_norm = c.arch == "qwen3" || c.arch == "qwen3_moe";
    if (gemma) c.norms_per_layer = 4;
  }
  // Sliding windows: Qwen2 carries sliding_window but only uses it with use_sliding_window;
  // Phi-3 lists one that the engines do not apply.
  if (s.use_sliding_window.value_or(true) && c.arch != "phi3")
    c.sliding_window = s.sliding_window.value_or(0);
  if (c.sliding_window > 0) {
    if (s.sliding_window_period)
      c.swa_period = *s.sliding_window_period;
    else if (c.arch == "gemma2")
      c.swa_period = 2;
  }
  return c;
}

plan::ModelFileReaders kvplan_model_readers() {
  plan::ModelFileReaders r;
  r.gguf = [](const std::string& path) { return kvplan_model_from_gguf(GgufFile::open(path)); };
  r.config_json = kvplan_model_from_config_json;
  return r;
}

}  // namespace llmctl::cli
