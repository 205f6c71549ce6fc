#pragma once
// kvplan's planning input (plan/model_config.h) from the engine's one reader of GGUF metadata
// (model/config.h read_gguf_shape) and of config.json (model/hf_config.h read_hf_shape): the
// same keys, checks and messages as the engine; for GGUF the architecture table's window
// pattern (model/arch.h). Here in cli/ because plan/ is pure math
// and may not include model/ (ARCHITECTURE.md layering).
//
// From the GGUF shape: every count, head_dim and v_head_dim, n_ff, n_vocab, max_ctx (the training
// context; 0 when the file has none), tied embeddings (no output.weight), q/k/v biases and
// QK-norm (their tensors in block 0), the MoE and MLA numbers (MLA: qk_rope_dim is
// rope.dimension_count, which must be given, qk_nope_dim = head_dim - qk_rope_dim, one latent
// per token: n_kv_heads = n_heads), and the sliding window: the file's window on the layers
// the architecture's row names (its period overridden by attention.sliding_window_pattern);
// none for a row without a window; every layer for an architecture the engine does not know.

#include <string>

#include "plan/model_config.h"

namespace llmctl {
class GgufFile;
}

namespace llmctl::cli {

plan::ModelConfig kvplan_model_from_gguf(const GgufFile& f);
// From config.json through the engine's read_hf_shape (model/hf_config.h): the same numbers;
// tied embeddings by default, q/k/v biases (or attention_bias), QK-norm and four norms per
// layer (norms before and after) from the engine's row when model_type names one (arch.h),
// else by kvplan's rules (tied for gemma*, biases for qwen2, QK-norm for qwen3*, four norms
// for gemma*); the window gated by use_sliding_window and not applied for phi3, its period
// from layer_types or 2 for gemma2.
plan::ModelConfig kvplan_model_from_config_json(const std::string& path);
// The readers plan::load_model takes: the two above.
plan::ModelFileReaders kvplan_model_readers();

}  // namespace llmctl::cli
