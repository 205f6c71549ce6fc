#pragma once
// kvplan's planning input (plan/model_config.h) from the engine's one reader of GGUF metadata
// (model/config.h read_gguf_shape: the same keys, checks and messages as the engine) and the
// architecture table's window pattern (model/arch.h). Here in cli/ because plan/ is pure math
// and may not include model/ (ARCHITECTURE.md layering).
//
// From the shape: every count, head_dim and v_head_dim, n_ff, n_vocab, max_ctx (the training
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
// The readers plan::load_model takes: GGUF through kvplan_model_from_gguf, config.json
// through plan::model_from_config_json.
plan::ModelFileReaders kvplan_model_readers();

}  // namespace llmctl::cli
