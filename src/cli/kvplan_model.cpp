// kvplan's planning input from the engine's GGUF reader (kvplan_model.h).
#include "cli/kvplan_model.h"

#include <fmt/format.h>

#include <optional>

#include "core/error.h"
#include "io/gguf.h"
#include "io/gguf_format.h"
#include "model/arch.h"
#include "model/config.h"

namespace llmctl::cli {

plan::ModelConfig kvplan_model_from_gguf(const GgufFile& f) {
  const ModelShape s = read_gguf_shape(f);
  plan::ModelConfig c;
  c.name = f.path();
  c.source = "GGUF metadata of " + f.path();
  c.arch = s.arch;
  c.label = s.name.empty() ? s.arch : s.name;
  c.n_layers = s.n_layers;
  c.n_embd = s.n_embd;
  c.n_heads = s.n_heads;
  c.n_kv_heads = s.n_kv_heads;
  c.head_dim = s.head_dim;
  c.v_head_dim = s.v_head_dim;
  c.n_ff = s.n_ff;
  c.n_vocab = s.n_vocab;
  c.max_ctx = s.n_ctx_train;
  c.tied_embeddings = !s.has_output;
  c.qkv_bias = s.has_q_bias;
  c.qk_norm = s.has_q_norm;
  if (c.arch == "gemma2") c.norms_per_layer = 4;
  c.n_experts = s.n_experts;
  c.n_experts_used = s.n_experts_used;
  c.n_shared_experts = s.n_shared_experts;
  c.n_ff_expert = s.n_ff_expert;
  c.n_dense_layers = s.n_dense_layers;
  c.sliding_window = s.sliding_window.value_or(0);
  if (const std::optional<WindowPattern> p = arch_window_pattern(c.arch)) {
    if (p->layers == WindowLayers::None) c.sliding_window = 0;  // the engine ignores the key
    if (p->layers == WindowLayers::AllButEveryPeriod)
      c.swa_period = s.sliding_window_period.value_or(p->period);
  }
  c.kv_lora_rank = s.kv_lora_rank;
  if (c.is_mla()) {
    if (!s.n_rot_given)
      throw FileError(f.path(),
                      fmt::format("missing metadata key '{}.rope.dimension_count'", s.arch));
    c.q_lora_rank = s.q_lora_rank;
    c.qk_rope_dim = s.n_rot;
    c.qk_nope_dim = c.head_dim - c.qk_rope_dim;
    c.n_kv_heads = c.n_heads;
  }
  for (const GgufTensorInfo& t : f.tensors()) c.file_weight_bytes += t.n_bytes;
  c.file_params = gguf_parameter_count(f);
  return c;
}

plan::ModelFileReaders kvplan_model_readers() {
  plan::ModelFileReaders r;
  r.gguf = [](const std::string& path) { return kvplan_model_from_gguf(GgufFile::open(path)); };
  r.config_json = [](const std::string& path) { return plan::model_from_config_json(path); };
  return r;
}

}  // namespace llmctl::cli
