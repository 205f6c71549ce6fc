#pragma once
// The shape of a model as kvplan needs it: enough to count every parameter and every KV-cache
// byte exactly. Filled from the built-in catalog (model_catalog.cpp), or from GGUF metadata or
// a Hugging Face config.json by the engine's readers (through the CLI: cli/kvplan_model.h).
// Pure data and arithmetic; no backend.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>


namespace llmctl::plan {

struct ModelConfig {
  std::string name;    // catalog key ("llama-3.1-8b") or file path
  std::string label;   // human name ("Llama-3.1-8B")
  std::string source;  // where the numbers come from
  std::string arch;    // "llama", "qwen2", "gemma2", "deepseek_v3" ...

  int64_t n_layers = 0;
  int64_t n_embd = 0;
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;    // K (and Q) head size; from the configuration when it says so
  int64_t v_head_dim = 0;  // V head size; 0 means head_dim
  int64_t n_ff = 0;        // dense MLP intermediate size
  int64_t n_vocab = 0;
  int64_t max_ctx = 0;     // trained / configured maximum context
  bool tied_embeddings = false;
  bool qkv_bias = false;         // Qwen2: biases on q, k, v
  bool qk_norm = false;          // Qwen3: RMSNorm over q and k heads
  int64_t norms_per_layer = 2;   // Gemma-2 has 4 (pre/post attention and MLP)
  bool o_bias = false;           // gpt-oss: a bias on the attention output projection
  bool attn_sinks = false;       // gpt-oss: one sink logit per head
  bool moe_biases = false;       // gpt-oss: router and per-expert gate/up/down biases

  // Sliding-window attention: window in tokens (0: none). swa_period 0: every layer slides;
  // P > 0: layer l is a full-attention layer when l % P == P - 1, the others slide (Gemma-2: 2).
  int64_t sliding_window = 0;
  int64_t swa_period = 0;

  // Multi-head latent attention (DeepSeek-V2/V3): the cache holds one latent vector of
  // kv_lora_rank plus the shared RoPE key of qk_rope_dim per token per layer.
  int64_t kv_lora_rank = 0;  // > 0: MLA
  int64_t q_lora_rank = 0;   // 0: q is a plain projection
  int64_t qk_nope_dim = 0;
  int64_t qk_rope_dim = 0;

  // Mixture of experts (0 experts: dense). The first n_dense_layers use the dense MLP (n_ff).
  int64_t n_experts = 0;
  int64_t n_experts_used = 0;
  int64_t n_shared_experts = 0;  // each of size n_ff_expert
  int64_t n_ff_expert = 0;
  // A shared expert of its own size (Qwen2-MoE: one, gated by a sigmoid); 0: none beyond
  // n_shared_experts.
  int64_t n_ff_shared = 0;
  int64_t n_dense_layers = 0;

  // Published total parameter count from the model card (0: unknown); for tests and --explain.
  double published_params = 0.0;
  // GGUF only: the file's tensor bytes and parameter count (0 when not from GGUF).
  uint64_t file_weight_bytes = 0;
  int64_t file_params = 0;

  bool is_mla() const { return kv_lora_rank > 0; }
  bool is_moe() const { return n_experts > 0; }
  // FFN width every token runs besides its routed experts (the shared experts').
  int64_t shared_ff() const { return n_shared_experts * n_ff_expert + n_ff_shared; }
  int64_t v_dim() const { return v_head_dim > 0 ? v_head_dim : head_dim; }
  // Window of layer `l` in tokens, or 0 for full attention.
  int64_t layer_window(int64_t l) const;
  bool layer_is_moe(int64_t l) const { return is_moe() && l >= n_dense_layers; }
};

// Parameter counts from the shapes.
struct ParamCounts {
  int64_t embedding = 0;  // token embedding table
  int64_t lm_head = 0;    // 0 when tied
  int64_t linear = 0;     // every matrix in the layers (attention, MLP, experts, router)
  int64_t expert_linear = 0;  // of which routed experts
  int64_t small = 0;      // norms and biases
  int64_t total() const { return embedding + lm_head + linear + small; }
  // Parameters one token's forward pass multiplies with (top-k routed experts only, no
  // embedding lookup, lm_head included): 2 FLOPs each.
  int64_t active_matmul = 0;
};
ParamCounts count_params(const ModelConfig& cfg);

// The built-in catalog (model_catalog.cpp).
const std::vector<ModelConfig>& model_catalog();
// A catalog model by name (case-insensitive; "meta-llama/Llama-3.1-8B" also matches
// "llama-3.1-8b"); throws Error listing the closest names when unknown.
ModelConfig find_model(const std::string& name);
// How kvplan reads a model file: through the engine's one reader (model/config.h
// read_gguf_shape for GGUF metadata, model/hf_config.h read_hf_shape for config.json), which
// plan/ may not include, so the CLI passes them in (cli/kvplan_model.h). A reader throws FileError naming the file and the key.
struct ModelFileReaders {
  std::function<ModelConfig(const std::string& path)> gguf;
  std::function<ModelConfig(const std::string& path)> config_json;
};
// NAME (the catalog), FILE.gguf, config.json or a directory holding config.json.
ModelConfig load_model(const std::string& name_or_file, const ModelFileReaders& readers);

// Names in `names` closest to `query` by edit distance (at most `n`), for "did you mean".
std::vector<std::string> closest_names(const std::string& query, const std::vector<std::string>& names,
                                       size_t n = 5);
std::string lowercase(std::string s);

}  // namespace llmctl::plan
