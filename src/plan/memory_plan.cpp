// Memory plan arithmetic (rules in memory_plan.h and docs/kvplan.md).
#include "plan/memory_plan.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/sliding_window.h"
#include "plan/explain.h"  // sequence_count

namespace llmctl::plan {

Engine parse_engine(const std::string& name) {
  const std::string n = lowercase(name);
  if (n == "llmctl") return Engine::Llmctl;
  if (n == "vllm") return Engine::Vllm;
  if (n == "llamacpp" || n == "llama.cpp" || n == "llama-cpp") return Engine::Llamacpp;
  throw Error(fmt::format("unknown engine '{}'", name), "use llmctl, vllm or llamacpp");
}

const char* engine_name(Engine e) {
  switch (e) {
    case Engine::Vllm: return "vllm";
    case Engine::Llamacpp: return "llamacpp";
    case Engine::Llmctl: break;
  }
  return "llmctl";
}

std::string check_tensor_parallel(const ModelConfig& m, int64_t tp) {
  if (tp < 1) return "the tensor-parallel size must be at least 1";
  if (m.n_heads % tp != 0)
    return fmt::format("tensor parallelism {} does not divide the {} attention heads", tp, m.n_heads);
  if (!m.is_mla() && m.n_kv_heads % tp != 0 && tp % m.n_kv_heads != 0)
    return fmt::format("tensor parallelism {} neither divides the {} KV heads nor is a multiple of them",
                       tp, m.n_kv_heads);
  return "";
}

std::string kv_types_label(const PlanInputs& in) {
  const KvFormat& v = v_format(in);
  return v.name == in.kv.name ? in.kv.name : fmt::format("K {}, V {}", in.kv.name, v.name);
}

KvFormula kv_formula(const ModelConfig& m, const KvFormat& k_type, const KvFormat& v_type, int64_t tp) {
  KvFormula f;
  f.mla = m.is_mla();
  f.n_layers = m.n_layers;
  uint64_t layer_bytes = 0, layer_bytes_pg = 0;
  if (f.mla) {
    // One latent vector (kv_lora_rank) plus the shared RoPE key (qk_rope_dim) per token and
    // layer; every TP rank holds all of it (the latent is not split across heads).
    f.kv_heads = f.kv_heads_per_gpu = 1;
    f.k_dim = m.kv_lora_rank;
    f.v_dim = m.qk_rope_dim;
    f.elems_per_token_layer = m.kv_lora_rank + m.qk_rope_dim;
    layer_bytes = layer_bytes_pg = k_type.bytes(f.elems_per_token_layer);
    f.replicated = tp > 1;
  } else {
    f.kv_heads = m.n_kv_heads;
    f.replicated = tp > m.n_kv_heads;
    f.kv_heads_per_gpu = f.replicated ? 1 : m.n_kv_heads / tp;
    f.k_dim = m.head_dim;
    f.v_dim = m.v_dim();
    f.elems_per_token_layer = m.n_kv_heads * (f.k_dim + f.v_dim);
    layer_bytes = k_type.bytes(m.n_kv_heads * f.k_dim) + v_type.bytes(m.n_kv_heads * f.v_dim);
    layer_bytes_pg =
        k_type.bytes(f.kv_heads_per_gpu * f.k_dim) + v_type.bytes(f.kv_heads_per_gpu * f.v_dim);
  }
  f.bytes_per_token = layer_bytes * static_cast<uint64_t>(m.n_layers);
  f.bytes_per_token_per_gpu = layer_bytes_pg * static_cast<uint64_t>(m.n_layers);
  f.layer_bytes_per_gpu.assign(static_cast<size_t>(m.n_layers), layer_bytes_pg);
  return f;
}

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t pad_to(int64_t a, int64_t b) { return ceil_div(a, b) * b; }
uint64_t to_bytes(double x) { return x <= 0 ? 0 : static_cast<uint64_t>(std::llround(x)); }

// Positions layer l keeps for `seqs` sequences of `ctx` tokens, by the engine's rule
// (memory_plan.h).
int64_t layer_cells(const PlanInputs& in, int64_t l, int64_t ctx, int64_t seqs) {
  const int64_t w = in.model.layer_window(l);
  if (in.engine == Engine::Llamacpp) {
    // Its iSWA cache serves the architectures with a pattern of windowed and global layers
    // (Gemma 2, 3); a window on every layer (Mistral v0.1) it runs as full attention.
    const int64_t cells = pad_to(ctx * seqs, kLlamacppPad);
    const bool iswa = w > 0 && in.model.swa_period > 0;
    return iswa ? pad_to(std::min(cells, w * seqs + in.llamacpp_ubatch), kLlamacppPad) : cells;
  }
  if (w > 0 && in.engine == Engine::Llmctl) {
    // run_session.cpp: the forward pass's batch is -b, at most every position of the batch.
    const int64_t chunk = std::max<int64_t>(1, std::min(in.llmctl_batch_tokens, ctx * seqs));
    return seqs * window_blocks_per_sequence(w, in.block_size, chunk, ctx) * in.block_size;
  }
  return seqs * pad_to(w > 0 ? std::min(ctx, w) : ctx, in.block_size);
}

}  // namespace

uint64_t kv_bytes_for_batch(const PlanInputs& in, const KvFormula& f, int64_t ctx, int64_t seqs) {
  uint64_t total = 0;
  for (int64_t l = 0; l < f.n_layers; ++l)
    total += static_cast<uint64_t>(layer_cells(in, l, ctx, seqs)) *
             f.layer_bytes_per_gpu[static_cast<size_t>(l)];
  return total;
}

uint64_t kv_bytes_for_context(const PlanInputs& in, const KvFormula& f, int64_t ctx) {
  return kv_bytes_for_batch(in, f, ctx, 1);
}

uint64_t weights_bytes_per_gpu(const ModelConfig& m, const WeightFormat& w, int64_t tp) {
  if (w.from_file) {
    if (m.file_weight_bytes == 0)
      throw Error("--weight-type gguf needs a GGUF model file", "give a weight type such as bf16 or q4_0");
    return m.file_weight_bytes / static_cast<uint64_t>(tp);
  }
  const ParamCounts p = count_params(m);
  const auto L = static_cast<double>(m.n_layers), d = static_cast<double>(m.n_embd);
  // Replicated on every rank: MLA's down-projections (q_a, kv_a), and K/V projections when TP
  // exceeds the KV heads (each rank keeps whole heads).
  double replicated = 0, kv_proj_total = 0, kv_proj_pg = 0;
  if (m.is_mla()) {
    replicated = L * d * static_cast<double>(m.kv_lora_rank + m.qk_rope_dim + m.q_lora_rank);
  } else {
    const auto hd = static_cast<double>(m.head_dim + m.v_dim());
    kv_proj_total = L * d * static_cast<double>(m.n_kv_heads) * hd;
    const int64_t heads_pg = tp > m.n_kv_heads ? 1 : m.n_kv_heads / tp;
    kv_proj_pg = L * d * static_cast<double>(heads_pg) * hd;
  }
  const auto t = static_cast<double>(tp);
  const double linear_pg = (static_cast<double>(p.linear) - replicated - kv_proj_total) / t + replicated + kv_proj_pg;
  const double emb_b = w.embeddings_16bit ? 2.0 : w.bytes_per_param;
  const double small_b = w.bytes_per_param >= 4 ? 4.0 : 2.0;
  return to_bytes(linear_pg * w.bytes_per_param + static_cast<double>(p.embedding + p.lm_head) / t * emb_b +
                  static_cast<double>(p.small) * small_b);
}

uint64_t weights_bytes_total(const ModelConfig& m, const WeightFormat& w) {
  return weights_bytes_per_gpu(m, w, 1);
}

uint64_t activation_estimate(const PlanInputs& in) {
  const ModelConfig& m = in.model;
  int64_t ff = m.n_dense_layers > 0 || !m.is_moe() ? m.n_ff : 0;
  if (m.is_moe()) ff = std::max(ff, m.n_experts_used * m.n_ff_expert + m.shared_ff());
  const auto d = static_cast<double>(m.n_embd), t = static_cast<double>(in.tp);
  const auto ffd = static_cast<double>(ff), vocab = static_cast<double>(m.n_vocab);
  if (in.engine == Engine::Llamacpp) {
    // Compute buffer: one micro-batch of 512 tokens in f32: logits, MLP and hidden states, and
    // one layer's attention scores over all cells (no flash attention).
    const double ub = 512;
    const auto cells = static_cast<double>(pad_to(in.ctx * std::max<int64_t>(1, in.batch), kLlamacppPad));
    return to_bytes(ub * (vocab + 3 * ffd + 4 * d) * 4 + ub * cells * static_cast<double>(m.n_heads) * 4);
  }
  // vLLM's profile run pushes max_num_batched_tokens dummy tokens through the model. Its peak
  // is the MLP intermediate (gate/up and activation: ~3 x ff, split by TP) plus a few hidden-
  // size buffers, in 16-bit, plus f32 logits and their softmax for max_num_seqs sequences.
  // Calibrated on vLLM's logs (docs/kvplan.md): Llama-3.1-8B, 8192 tokens, 1024 seqs -> 1.89 GiB.
  // MoE: fused_moe also keeps every (token, expert) pair's hidden-size output before the
  // weighted sum (intermediate_cache3: tokens x top_k x hidden).
  const double act_b = in.weight.bytes_per_param >= 4 ? 4.0 : 2.0;
  const auto tokens = static_cast<double>(in.max_batched_tokens), seqs = static_cast<double>(in.max_num_seqs);
  const double moe_out = m.is_moe() ? static_cast<double>(m.n_experts_used) * d : 0.0;
  return to_bytes(tokens * (4 * d + 3 * ffd / t + moe_out) * act_b + seqs * vocab / t * 8);
}

uint64_t default_overhead(const PlanInputs& in) {
  // vLLM v1 logs ~0.25 GiB of non-torch memory (cuBLAS workspace, allocator slack) on one GPU;
  // its CUDA context sits in the (1 - gpu_util) margin. With TP, NCCL and custom all-reduce
  // buffers add ~1.8 GiB (vLLM logs: 1.79 -> 3.58 GiB going to TP 2, vllm#10511; 2.04 GiB at
  // TP 4, vllm#21429). llama.cpp: CUDA context and cuBLAS workspace, ~0.3 GiB.
  if (in.engine == Engine::Llamacpp) return to_bytes(0.30 * kGiB);
  return to_bytes((in.tp > 1 ? 2.05 : 0.25) * kGiB);
}

namespace {

// Largest context whose KV for `seqs` sequences fits in `pool` bytes (binary search; sliding
// windows make the per-sequence cost flatten out).
int64_t max_context_for(const PlanInputs& in, const KvFormula& f, int64_t seqs, uint64_t pool) {
  constexpr int64_t kCap = int64_t{1} << 26;
  auto fits = [&](int64_t ctx) { return kv_bytes_for_batch(in, f, ctx, seqs) <= pool; };
  if (!fits(1)) return 0;
  int64_t lo = 1, hi = kCap;
  if (fits(hi)) return hi;
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo;
}

}  // namespace

MemoryPlan plan_memory(const PlanInputs& in, bool with_levers) {
  LLMCTL_ASSERT(in.tp >= 1 && in.n_gpus >= in.tp && in.ctx >= 1 && in.batch >= 1 && in.block_size >= 1);
  MemoryPlan p;
  p.params = count_params(in.model);
  p.kv = kv_formula(in.model, in.kv, v_format(in), in.tp);
  p.replicas = in.n_gpus / in.tp;
  p.batch_per_replica = ceil_div(in.batch, p.replicas);
  const bool lcpp = in.engine == Engine::Llamacpp;
  p.block_size = lcpp ? kLlamacppPad : in.block_size;
  p.usable_bytes = in.gpu.usable_bytes;
  p.requested_bytes = lcpp ? p.usable_bytes : to_bytes(in.gpu_util * static_cast<double>(p.usable_bytes));
  p.weights_bytes = weights_bytes_total(in.model, in.weight);
  p.weights_bytes_per_gpu = weights_bytes_per_gpu(in.model, in.weight, in.tp);
  p.activation_bytes = in.activation ? *in.activation : activation_estimate(in);
  p.overhead_bytes = in.overhead ? *in.overhead : default_overhead(in);
  if (in.kv_budget) {
    p.kv_budget_given = true;
    p.kv_budget_bytes = static_cast<int64_t>(*in.kv_budget);
  } else {
    p.kv_budget_bytes = static_cast<int64_t>(p.requested_bytes) - static_cast<int64_t>(p.weights_bytes_per_gpu) -
                        static_cast<int64_t>(p.activation_bytes) - static_cast<int64_t>(p.overhead_bytes);
  }
  const uint64_t block_bytes = static_cast<uint64_t>(p.block_size) * p.kv.bytes_per_token_per_gpu;
  p.kv_blocks = p.kv_budget_bytes > 0 ? static_cast<int64_t>(static_cast<uint64_t>(p.kv_budget_bytes) / block_bytes) : 0;
  p.kv_tokens = p.kv_blocks * p.block_size;
  const uint64_t pool = static_cast<uint64_t>(p.kv_blocks) * block_bytes;
  const auto bpr = static_cast<uint64_t>(p.batch_per_replica);
  p.kv_bytes_per_seq = kv_bytes_for_context(in, p.kv, in.ctx);
  bool any_window = false;
  for (int64_t l = 0; l < in.model.n_layers; ++l) any_window = any_window || in.model.layer_window(l) > 0;
  if (lcpp) {
    // One unified cache of ctx * sequences cells, padded to 256; each sequence gets n_ctx / n_seq.
    // Windowed layers: the smaller iSWA cache (layer_cells).
    p.kv_bytes_needed = kv_bytes_for_batch(in, p.kv, in.ctx, p.batch_per_replica);
    p.max_concurrency = p.kv_tokens / in.ctx * p.replicas;
    p.concurrency_ratio = static_cast<double>(p.kv_tokens) / static_cast<double>(in.ctx);
    p.max_context = any_window ? max_context_for(in, p.kv, p.batch_per_replica, pool)
                               : p.kv_tokens / p.batch_per_replica;
    p.fits = p.kv_budget_bytes >= 0 && p.kv_bytes_needed <= pool;
  } else {
    p.kv_bytes_needed = bpr * p.kv_bytes_per_seq;
    p.max_concurrency = static_cast<int64_t>(pool / p.kv_bytes_per_seq) * p.replicas;
    // vLLM logs blocks / blocks per request (= tokens / max_model_len when it is a whole number
    // of blocks); with windows, pool bytes / bytes per request.
    p.concurrency_ratio = any_window ? static_cast<double>(pool) / static_cast<double>(p.kv_bytes_per_seq)
                                     : static_cast<double>(p.kv_blocks) /
                                           static_cast<double>(ceil_div(in.ctx, p.block_size));
    p.max_context = any_window ? max_context_for(in, p.kv, p.batch_per_replica, pool)
                               : p.kv_blocks / p.batch_per_replica * p.block_size;
    p.fits = p.kv_budget_bytes >= 0 && p.kv_bytes_needed <= pool;
  }
  p.needed_bytes = p.weights_bytes_per_gpu + p.activation_bytes + p.overhead_bytes + p.kv_bytes_needed;
  if (!p.fits) p.shortfall_bytes = std::max(1.0, static_cast<double>(p.kv_bytes_needed) - static_cast<double>(p.kv_budget_bytes));
  if (p.fits || !with_levers) return p;

  // Levers: what each alternative saves per GPU, and whether it alone makes the plan fit.
  auto try_lever = [&](const std::string& what, PlanInputs alt) {
    const MemoryPlan q = plan_memory(alt, false);
    const double saves = static_cast<double>(p.needed_bytes) - static_cast<double>(q.needed_bytes);
    if (saves > 0) p.levers.push_back({what, saves, q.fits});
  };
  if (in.kv.bytes_per_elem() > 1 && v_format(in).bytes_per_elem() > 1) {
    PlanInputs alt = in;
    alt.kv = parse_kv_format("fp8");
    alt.kv_v.reset();
    try_lever("--kv-type fp8 (halves the KV cache of 16-bit KV)", alt);
  }
  if (!in.weight.from_file && in.weight.bytes_per_param > 1.1 && !in.kv_budget) {
    PlanInputs alt = in;
    alt.weight = parse_weight_format(in.gpu.tflops_8 > 0 ? "fp8" : "int8");
    try_lever(fmt::format("--weight-type {}", alt.weight.name), alt);
  }
  if (!in.weight.from_file && in.weight.bytes_per_param > 0.6 && !in.kv_budget) {
    PlanInputs alt = in;
    alt.weight = parse_weight_format("awq", 128);
    try_lever("--weight-type awq (int4, group 128)", alt);
  }
  for (int64_t tp = in.tp * 2; tp <= 64; tp *= 2) {
    if (!check_tensor_parallel(in.model, tp).empty() || in.kv_budget) continue;
    PlanInputs alt = in;
    alt.tp = tp;
    alt.n_gpus = tp * p.replicas;
    const MemoryPlan q = plan_memory(alt, false);
    if (q.fits) {
      p.levers.push_back({fmt::format("--gpus {} --tp {}", alt.n_gpus, tp),
                          static_cast<double>(p.needed_bytes) - static_cast<double>(q.needed_bytes), true});
      break;
    }
  }
  if (p.max_concurrency >= 1 && p.max_concurrency < in.batch) {
    PlanInputs alt = in;
    alt.batch = p.max_concurrency;
    try_lever(fmt::format("--parallel {} (most sequences at this context)", p.max_concurrency), alt);
  }
  // A shorter context, never one beyond what the model is configured for.
  const int64_t max_ctx = in.model.max_ctx > 0 ? std::min(p.max_context, in.model.max_ctx) : p.max_context;
  if (max_ctx >= 1 && max_ctx < in.ctx) {
    PlanInputs alt = in;
    alt.ctx = max_ctx;
    try_lever(fmt::format("-c {} ({})", max_ctx,
                          max_ctx < p.max_context ? "the model's configured context"
                                                  : fmt::format("longest context for {}", sequence_count(in.batch))),
              alt);
  }
  std::stable_sort(p.levers.begin(), p.levers.end(),
                   [](const Lever& a, const Lever& b) { return a.saves_bytes > b.saves_bytes; });
  return p;
}

}  // namespace llmctl::plan
