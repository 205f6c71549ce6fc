#pragma once
// The memory plan: weights, KV cache, activation workspace and reserve per GPU, and what fits,
// under the budget rule of an engine. Pure arithmetic; see docs/kvplan.md for the rules.
//
// Budget rules (per GPU; "usable" is cudaMemGetInfo's total):
//   vllm    requested = gpu_util * usable; kv = requested - weights - peak activation - non-torch;
//           blocks = floor(kv / (block_size * kv bytes per token over all layers)).
//   llmctl  the same rule (our engine adopts vLLM's accounting), blocks of --block-size.
//   llamacpp no utilisation factor: kv = usable - weights - compute buffer - CUDA context;
//           KV cells are padded to multiples of 256; one unified cache of ctx * sequences cells.
//
// Sliding-window layers (ModelConfig::layer_window) hold, per engine:
//   llmctl   window_blocks_per_sequence(window, block, batch tokens, ctx) blocks per sequence
//            (core/sliding_window.h), what PagedKvCache allocates (model/kv_cache.h);
//   vllm     min(ctx, window) tokens rounded up to blocks;
//   llamacpp its iSWA cache (llama-kv-cache-iswa.cpp), for a pattern of windowed and global
//            layers (Gemma 2, 3): the windowed layers get pad256(min(cells, window * sequences +
//            n_ubatch)) cells, the others all cells; a window on every layer (Mistral v0.1)
//            it runs as full attention.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "plan/formats.h"
#include "plan/gpu_catalog.h"
#include "plan/model_config.h"

namespace llmctl::plan {

enum class Engine { Llmctl, Vllm, Llamacpp };
Engine parse_engine(const std::string& name);
const char* engine_name(Engine e);

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr int64_t kLlamacppPad = 256;  // llama.cpp pads KV cells to 256

struct PlanInputs {
  ModelConfig model;
  GpuSpec gpu;
  int64_t n_gpus = 1;
  int64_t tp = 1;  // tensor-parallel size; n_gpus / tp data-parallel replicas
  WeightFormat weight;
  KvFormat kv;                   // K's type, and V's unless kv_v is set
  std::optional<KvFormat> kv_v;  // V's type when it differs (llama.cpp's -ctk q8_0 -ctv f16)
  int64_t ctx = 4096;
  int64_t batch = 1;  // concurrent sequences, over all replicas
  int64_t block_size = 16;
  double gpu_util = 0.9;
  Engine engine = Engine::Llmctl;
  std::optional<uint64_t> kv_budget;   // per GPU, when already known (e.g. from an engine's log)
  std::optional<uint64_t> activation;  // per GPU, overrides the estimate
  std::optional<uint64_t> overhead;    // per GPU non-torch / context reserve, overrides the default
  int64_t max_batched_tokens = 8192;   // vLLM's profile run (max_num_batched_tokens)
  int64_t max_num_seqs = 1024;         // vLLM v1 default on large GPUs; sampler logits per sequence
  int64_t llmctl_batch_tokens = 512;   // llmctl run's -b: positions one forward pass writes
  int64_t llamacpp_ubatch = 512;       // llama.cpp's n_ubatch (its SWA cache's headroom)
};

// Returns "" when the tensor-parallel size works for the model, else why not.
std::string check_tensor_parallel(const ModelConfig& m, int64_t tp);

// The KV-cache formula with its numbers.
struct KvFormula {
  bool mla = false;
  int64_t n_layers = 0;
  int64_t kv_heads = 0;          // whole model
  int64_t kv_heads_per_gpu = 0;  // after TP split (>= 1: replicated when tp > kv_heads)
  bool replicated = false;
  int64_t k_dim = 0, v_dim = 0;  // per head (MLA: latent rank and rope dim, one vector)
  int64_t elems_per_token_layer = 0;  // whole model
  uint64_t bytes_per_token = 0;       // all layers, whole model (one copy)
  uint64_t bytes_per_token_per_gpu = 0;  // all layers, what one GPU stores
  std::vector<uint64_t> layer_bytes_per_gpu;  // per layer, per token
};
// K in k_type, V in v_type (MLA: the one latent vector in k_type).
KvFormula kv_formula(const ModelConfig& m, const KvFormat& k_type, const KvFormat& v_type, int64_t tp);
inline KvFormula kv_formula(const ModelConfig& m, const KvFormat& kv, int64_t tp) {
  return kv_formula(m, kv, kv, tp);
}
// V's type (kv_v, else kv).
inline const KvFormat& v_format(const PlanInputs& in) { return in.kv_v ? *in.kv_v : in.kv; }
// "q8_0", or "K q8_0, V f16" when the types differ (reports).
std::string kv_types_label(const PlanInputs& in);

struct Lever {
  std::string what;         // "--kv-type fp8"
  double saves_bytes = 0;   // per GPU
  bool fits_after = false;
};

struct MemoryPlan {
  ParamCounts params;
  KvFormula kv;
  int64_t replicas = 1;
  int64_t batch_per_replica = 1;
  int64_t block_size = 16;      // llama.cpp: 256 (cell padding)
  uint64_t usable_bytes = 0;    // per GPU
  uint64_t requested_bytes = 0;  // per GPU: util * usable (vllm, llmctl); usable (llama.cpp)
  uint64_t weights_bytes = 0;   // whole model
  uint64_t weights_bytes_per_gpu = 0;
  uint64_t activation_bytes = 0;  // per GPU: peak activation / compute buffer
  uint64_t overhead_bytes = 0;    // per GPU: non-torch memory / CUDA context
  int64_t kv_budget_bytes = 0;    // per GPU; negative when weights alone do not fit
  bool kv_budget_given = false;
  int64_t kv_blocks = 0;          // per GPU pool
  int64_t kv_tokens = 0;          // kv_blocks * block_size
  uint64_t kv_bytes_per_seq = 0;  // per GPU, one sequence at ctx (windows, block rounding)
  uint64_t kv_bytes_needed = 0;   // per GPU, batch_per_replica sequences at ctx
  int64_t max_concurrency = 0;    // whole sequences at ctx, all replicas
  double concurrency_ratio = 0;   // kv_tokens / ctx per replica, as vLLM logs it
  int64_t max_context = 0;        // at batch (memory bound), tokens
  uint64_t needed_bytes = 0;      // per GPU: weights + activation + overhead + KV needed
  bool fits = false;
  double shortfall_bytes = 0;     // per GPU, > 0 when it does not fit
  std::vector<Lever> levers;      // largest saving first
};

// Bytes of KV one sequence of `ctx` tokens holds on one GPU (sliding windows and block rounding).
uint64_t kv_bytes_for_context(const PlanInputs& in, const KvFormula& f, int64_t ctx);
// Bytes of KV `seqs` sequences of `ctx` tokens hold on one GPU (llama.cpp: one unified cache).
uint64_t kv_bytes_for_batch(const PlanInputs& in, const KvFormula& f, int64_t ctx, int64_t seqs);
uint64_t weights_bytes_total(const ModelConfig& m, const WeightFormat& w);
uint64_t weights_bytes_per_gpu(const ModelConfig& m, const WeightFormat& w, int64_t tp);
// Peak activation (vLLM/llmctl) or compute buffer (llama.cpp) estimate per GPU.
uint64_t activation_estimate(const PlanInputs& in);
uint64_t default_overhead(const PlanInputs& in);

// The plan for `in`; `with_levers` also evaluates alternatives when it does not fit.
MemoryPlan plan_memory(const PlanInputs& in, bool with_levers = true);

}  // namespace llmctl::plan
