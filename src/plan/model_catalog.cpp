// Built-in model catalog: exact configuration values from each model's published config.json
// on Hugging Face (the repository is named in each entry's source). published_params is the
// total the model card states; tests check count_params() against it within 1%.
#include <algorithm>

#include "core/error.h"
#include "plan/model_config.h"

namespace llmctl::plan {

namespace {

// A dense decoder: the fields every entry sets. head_dim is given explicitly (it is not always
// hidden / heads: Llama-3.2-1B 64, Gemma-2-9B 256, Qwen3 128).
ModelConfig dense(const char* name, const char* label, const char* source, const char* arch,
                  int64_t n_layers, int64_t n_embd, int64_t n_heads, int64_t n_kv_heads,
                  int64_t head_dim, int64_t n_ff, int64_t n_vocab, int64_t max_ctx, bool tied,
                  double published) {
  ModelConfig c;
  c.name = name;
  c.label = label;
  c.source = source;
  c.arch = arch;
  c.n_layers = n_layers;
  c.n_embd = n_embd;
  c.n_heads = n_heads;
  c.n_kv_heads = n_kv_heads;
  c.head_dim = head_dim;
  c.n_ff = n_ff;
  c.n_vocab = n_vocab;
  c.max_ctx = max_ctx;
  c.tied_embeddings = tied;
  c.published_params = published;
  return c;
}

ModelConfig moe(ModelConfig c, int64_t n_experts, int64_t used, int64_t shared, int64_t n_ff_expert,
                int64_t n_dense_layers) {
  c.n_experts = n_experts;
  c.n_experts_used = used;
  c.n_shared_experts = shared;
  c.n_ff_expert = n_ff_expert;
  c.n_dense_layers = n_dense_layers;
  return c;
}

ModelConfig qwen2(ModelConfig c) {
  c.qkv_bias = true;  // Qwen2/2.5 attention has biases on q, k and v
  return c;
}

ModelConfig qwen3(ModelConfig c) {
  c.qk_norm = true;  // Qwen3: q_norm and k_norm (head_dim each) per layer, no qkv bias
  return c;
}

ModelConfig gemma2(ModelConfig c) {
  c.norms_per_layer = 4;  // input, post-attention, pre-feedforward, post-feedforward
  c.sliding_window = 4096;
  c.swa_period = 2;  // even layers slide over 4096 tokens, odd layers are global
  return c;
}

// gpt-oss (openai/gpt-oss-{20b,120b} config.json): q/k/v/o biases, attention sinks, a window
// of 128 on even layers (layer_types: sliding first, then full), router and expert biases.
ModelConfig gpt_oss(ModelConfig c) {
  c.qkv_bias = true;
  c.o_bias = true;
  c.attn_sinks = true;
  c.moe_biases = true;
  c.sliding_window = 128;
  c.swa_period = 2;
  return c;
}

// MLA (DeepSeek-V2/V3): n_heads query heads of qk_nope + qk_rope, values of v_head_dim.
ModelConfig mla(ModelConfig c, int64_t q_lora_rank, int64_t kv_lora_rank, int64_t qk_nope,
                int64_t qk_rope, int64_t v_head) {
  c.q_lora_rank = q_lora_rank;
  c.kv_lora_rank = kv_lora_rank;
  c.qk_nope_dim = qk_nope;
  c.qk_rope_dim = qk_rope;
  c.head_dim = qk_nope + qk_rope;
  c.v_head_dim = v_head;
  c.n_kv_heads = c.n_heads;  // every head has its own decompressed K/V; the cache holds the latent
  return c;
}

std::vector<ModelConfig> build_catalog() {
  std::vector<ModelConfig> m;
  // --- Llama 2 (meta-llama/Llama-2-{7,13,70}b-hf config.json) ---
  m.push_back(dense("llama-2-7b", "Llama-2-7B", "meta-llama/Llama-2-7b-hf config.json", "llama",
                    32, 4096, 32, 32, 128, 11008, 32000, 4096, false, 6.74e9));
  m.push_back(dense("llama-2-13b", "Llama-2-13B", "meta-llama/Llama-2-13b-hf config.json", "llama",
                    40, 5120, 40, 40, 128, 13824, 32000, 4096, false, 13.0e9));
  m.push_back(dense("llama-2-70b", "Llama-2-70B", "meta-llama/Llama-2-70b-hf config.json", "llama",
                    80, 8192, 64, 8, 128, 28672, 32000, 4096, false, 68.98e9));
  // --- Llama 3 / 3.1 / 3.2 (meta-llama/... config.json; vocab 128256) ---
  m.push_back(dense("llama-3-8b", "Llama-3-8B", "meta-llama/Meta-Llama-3-8B config.json", "llama",
                    32, 4096, 32, 8, 128, 14336, 128256, 8192, false, 8.03e9));
  m.push_back(dense("llama-3-70b", "Llama-3-70B", "meta-llama/Meta-Llama-3-70B config.json", "llama",
                    80, 8192, 64, 8, 128, 28672, 128256, 8192, false, 70.55e9));
  m.push_back(dense("llama-3.1-8b", "Llama-3.1-8B", "meta-llama/Llama-3.1-8B config.json", "llama",
                    32, 4096, 32, 8, 128, 14336, 128256, 131072, false, 8.03e9));
  m.push_back(dense("llama-3.1-70b", "Llama-3.1-70B", "meta-llama/Llama-3.1-70B config.json", "llama",
                    80, 8192, 64, 8, 128, 28672, 128256, 131072, false, 70.55e9));
  m.push_back(dense("llama-3.1-405b", "Llama-3.1-405B", "meta-llama/Llama-3.1-405B config.json",
                    "llama", 126, 16384, 128, 8, 128, 53248, 128256, 131072, false, 405.85e9));
  m.push_back(dense("llama-3.2-1b", "Llama-3.2-1B", "meta-llama/Llama-3.2-1B config.json (head_dim 64)",
                    "llama", 16, 2048, 32, 8, 64, 8192, 128256, 131072, true, 1.24e9));
  m.push_back(dense("llama-3.2-3b", "Llama-3.2-3B", "meta-llama/Llama-3.2-3B config.json", "llama",
                    28, 3072, 24, 8, 128, 8192, 128256, 131072, true, 3.21e9));
  // --- Mistral / Mixtral ---
  {
    // mistralai/Mistral-7B-v0.1 config.json: sliding_window 4096 on every layer.
    ModelConfig c = dense("mistral-7b", "Mistral-7B-v0.1", "mistralai/Mistral-7B-v0.1 config.json",
                          "llama", 32, 4096, 32, 8, 128, 14336, 32000, 32768, false, 7.24e9);
    c.sliding_window = 4096;
    m.push_back(c);
  }
  m.push_back(moe(dense("mixtral-8x7b", "Mixtral-8x7B-v0.1", "mistralai/Mixtral-8x7B-v0.1 config.json",
                        "mixtral", 32, 4096, 32, 8, 128, 0, 32000, 32768, false, 46.70e9),
                  8, 2, 0, 14336, 0));
  m.push_back(moe(dense("mixtral-8x22b", "Mixtral-8x22B-v0.1",
                        "mistral-community/Mixtral-8x22B-v0.1 config.json", "mixtral", 56, 6144, 48, 8,
                        128, 0, 32000, 65536, false, 140.6e9),
                  8, 2, 0, 16384, 0));
  // --- Qwen2.5 (Qwen/Qwen2.5-*/config.json; qkv bias; small models tie embeddings) ---
  m.push_back(qwen2(dense("qwen2.5-0.5b", "Qwen2.5-0.5B", "Qwen/Qwen2.5-0.5B config.json", "qwen2",
                          24, 896, 14, 2, 64, 4864, 151936, 32768, true, 0.49e9)));
  m.push_back(qwen2(dense("qwen2.5-1.5b", "Qwen2.5-1.5B", "Qwen/Qwen2.5-1.5B config.json", "qwen2",
                          28, 1536, 12, 2, 128, 8960, 151936, 32768, true, 1.54e9)));
  m.push_back(qwen2(dense("qwen2.5-7b", "Qwen2.5-7B", "Qwen/Qwen2.5-7B config.json", "qwen2", 28,
                          3584, 28, 4, 128, 18944, 152064, 131072, false, 7.61e9)));
  m.push_back(qwen2(dense("qwen2.5-14b", "Qwen2.5-14B", "Qwen/Qwen2.5-14B config.json", "qwen2", 48,
                          5120, 40, 8, 128, 13824, 152064, 131072, false, 14.7e9)));
  m.push_back(qwen2(dense("qwen2.5-32b", "Qwen2.5-32B", "Qwen/Qwen2.5-32B config.json", "qwen2", 64,
                          5120, 40, 8, 128, 27648, 152064, 131072, false, 32.5e9)));
  m.push_back(qwen2(dense("qwen2.5-72b", "Qwen2.5-72B", "Qwen/Qwen2.5-72B config.json", "qwen2", 80,
                          8192, 64, 8, 128, 29568, 152064, 131072, false, 72.7e9)));
  // --- Qwen3 (Qwen/Qwen3-*/config.json; explicit head_dim 128, q/k norms) ---
  m.push_back(qwen3(dense("qwen3-8b", "Qwen3-8B", "Qwen/Qwen3-8B config.json", "qwen3", 36, 4096, 32,
                          8, 128, 12288, 151936, 40960, false, 8.2e9)));
  m.push_back(qwen3(dense("qwen3-14b", "Qwen3-14B", "Qwen/Qwen3-14B config.json", "qwen3", 40, 5120,
                          40, 8, 128, 17408, 151936, 40960, false, 14.8e9)));
  m.push_back(qwen3(dense("qwen3-32b", "Qwen3-32B", "Qwen/Qwen3-32B config.json (head_dim 128, not 5120/64)",
                          "qwen3", 64, 5120, 64, 8, 128, 25600, 151936, 40960, false, 32.8e9)));
  m.push_back(qwen3(moe(dense("qwen3-30b-a3b", "Qwen3-30B-A3B", "Qwen/Qwen3-30B-A3B config.json",
                              "qwen3_moe", 48, 2048, 32, 4, 128, 6144, 151936, 40960, false, 30.5e9),
                        128, 8, 0, 768, 0)));
  m.push_back(qwen3(moe(dense("qwen3-235b-a22b", "Qwen3-235B-A22B", "Qwen/Qwen3-235B-A22B config.json",
                              "qwen3_moe", 94, 4096, 64, 4, 128, 12288, 151936, 40960, false, 235e9),
                        128, 8, 0, 1536, 0)));
  // --- gpt-oss (openai/gpt-oss-*/config.json: hidden 2880, 64 heads of 64, 8 KV heads,
  // experts of 2880, top-4; vocab 201088; 131072 context). Model cards: 21B with 3.6B active,
  // 117B with 5.1B active (count_params: 20.9B / 3.6B, 116.8B / 5.1B). ---
  m.push_back(gpt_oss(moe(dense("gpt-oss-20b", "gpt-oss-20b", "openai/gpt-oss-20b config.json",
                                "gpt-oss", 24, 2880, 64, 8, 64, 2880, 201088, 131072, false, 21e9),
                          32, 4, 0, 2880, 0)));
  m.push_back(gpt_oss(moe(dense("gpt-oss-120b", "gpt-oss-120b", "openai/gpt-oss-120b config.json",
                                "gpt-oss", 36, 2880, 64, 8, 64, 2880, 201088, 131072, false, 117e9),
                          128, 4, 0, 2880, 0)));
  // --- Gemma-2 (google/gemma-2-*/config.json; tied; window 4096 on alternating layers) ---
  m.push_back(gemma2(dense("gemma-2-9b", "Gemma-2-9B", "google/gemma-2-9b config.json (head_dim 256)",
                           "gemma2", 42, 3584, 16, 8, 256, 14336, 256000, 8192, true, 9.24e9)));
  m.push_back(gemma2(dense("gemma-2-27b", "Gemma-2-27B", "google/gemma-2-27b config.json (head_dim 128)",
                           "gemma2", 46, 4608, 32, 16, 128, 36864, 256000, 8192, true, 27.2e9)));
  // --- Phi-3 (microsoft/Phi-3-mini-4k-instruct config.json: fused qkv and gate_up, MHA). Its
  // config lists sliding_window 2047, but vLLM and llama.cpp run it as full attention. ---
  m.push_back(dense("phi-3-mini", "Phi-3-mini-4k", "microsoft/Phi-3-mini-4k-instruct config.json",
                    "phi3", 32, 3072, 32, 32, 96, 8192, 32064, 4096, false, 3.82e9));
  // --- DeepSeek MLA + MoE ---
  // deepseek-ai/DeepSeek-V2-Lite config.json: no q LoRA, kv_lora_rank 512, rope 64, 64 routed
  // experts (top 6) + 2 shared of 1408, first layer dense (10944).
  m.push_back(moe(mla(dense("deepseek-v2-lite", "DeepSeek-V2-Lite",
                            "deepseek-ai/DeepSeek-V2-Lite config.json", "deepseek2", 27, 2048, 16, 16,
                            0, 10944, 102400, 163840, false, 15.7e9),
                      0, 512, 128, 64, 128),
                  64, 6, 2, 1408, 1));
  // deepseek-ai/DeepSeek-V3 config.json: q_lora_rank 1536, kv_lora_rank 512, 256 routed
  // experts (top 8) + 1 shared of 2048, first 3 layers dense (18432). 671B main model; the
  // checkpoint's 685B adds the 14B multi-token-prediction module, which is not counted here.
  m.push_back(moe(mla(dense("deepseek-v3", "DeepSeek-V3", "deepseek-ai/DeepSeek-V3 config.json",
                            "deepseek_v3", 61, 7168, 128, 128, 0, 18432, 129280, 163840, false, 671e9),
                      1536, 512, 128, 64, 128),
                  256, 8, 1, 2048, 3));
  // --- TinyLlama (TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T config.json) ---
  m.push_back(dense("tinyllama-1.1b", "TinyLlama-1.1B",
                    "TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T config.json", "llama", 22,
                    2048, 32, 4, 64, 5632, 32000, 2048, false, 1.1e9));
  return m;
}

}  // namespace

const std::vector<ModelConfig>& model_catalog() {
  static const std::vector<ModelConfig> catalog = build_catalog();
  return catalog;
}

ModelConfig find_model(const std::string& name) {
  std::string key = lowercase(name);
  // "meta-llama/Llama-3.1-8B-Instruct" -> "llama-3.1-8b-instruct"
  if (const size_t slash = key.rfind('/'); slash != std::string::npos) key = key.substr(slash + 1);
  for (const char* suffix : {"-instruct", "-chat", "-hf", "-it", "-base"}) {
    const std::string s = suffix;
    if (key.size() > s.size() && key.compare(key.size() - s.size(), s.size(), s) == 0)
      key.resize(key.size() - s.size());
  }
  if (key.rfind("meta-", 0) == 0) key = key.substr(5);  // Meta-Llama-3-8B
  std::vector<std::string> names;
  for (const ModelConfig& m : model_catalog()) {
    if (m.name == key || lowercase(m.label) == key) return m;
    names.push_back(m.name);
  }
  const std::vector<std::string> close = closest_names(key, names);
  std::string list;
  for (const std::string& n : close) list += (list.empty() ? "" : ", ") + n;
  throw Error(fmt::format("unknown model '{}'; closest catalog names: {}", name, list),
              "give a catalog name, a .gguf file or a Hugging Face config.json; "
              "`llmctl kvplan --list-models` shows the catalog");
}

}  // namespace llmctl::plan
