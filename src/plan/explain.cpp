#include "plan/explain.h"

#include <fmt/format.h>

namespace llmctl::plan {

std::string gib_gb(double bytes) {
  // A small model's KV cache is not "0.00 GiB": MiB, or bytes, below a hundredth of the unit.
  if (bytes >= 0.01 * kGiB) return fmt::format("{:.2f} GiB ({:.2f} GB)", bytes / kGiB, bytes / 1e9);
  if (bytes >= 0.01 * 1024 * 1024) return fmt::format("{:.2f} MiB ({:.2f} MB)", bytes / (1024 * 1024), bytes / 1e6);
  return fmt::format("{:.0f} B", bytes);
}

std::string sequence_count(int64_t n) { return fmt::format("{} sequence{}", n, n == 1 ? "" : "s"); }

namespace {

std::string num(double x) {  // 131072 -> "131,072"
  std::string s = fmt::format("{:.0f}", x);
  for (int i = static_cast<int>(s.size()) - 3; i > 0 && s[static_cast<size_t>(i) - 1] != '-'; i -= 3)
    s.insert(static_cast<size_t>(i), ",");
  return s;
}

double d(uint64_t x) { return static_cast<double>(x); }

// 8.03e9 -> "8.03 B", 2.9e5 -> "292.80 K": a parameter count that never reads "0.00 B".
std::string count_text(double x) {
  if (x >= 1e9) return fmt::format("{:.2f} B", x / 1e9);
  if (x >= 1e6) return fmt::format("{:.2f} M", x / 1e6);
  if (x >= 1e3) return fmt::format("{:.2f} K", x / 1e3);
  return fmt::format("{:.0f}", x);
}


}  // namespace

std::vector<std::string> explain_plan(const PlanInputs& in, const MemoryPlan& p, const Roofline& r) {
  std::vector<std::string> out;
  const ModelConfig& m = in.model;
  const KvFormula& f = p.kv;
  const std::string eb = fmt::format("{:g} bytes ({})", in.kv.bytes_per_elem(), in.kv.name);
  out.push_back("KV cache per token (K and V of every layer, whole model):");
  if (f.mla) {
    out.push_back(fmt::format("  MLA: {} layers x (kv_lora_rank {} + qk_rope_head_dim {}) x {} = {} B",
                              f.n_layers, m.kv_lora_rank, m.qk_rope_dim, eb, num(d(f.bytes_per_token))));
    const double naive = 2.0 * static_cast<double>(m.n_layers * m.n_heads) * static_cast<double>(m.v_dim()) * in.kv.bytes_per_elem();
    out.push_back(fmt::format("  correction: MLA caches one compressed latent per token and layer, not K and V of "
                              "{} heads (2 x {} x {} x {} x {:g} = {} B, {:.0f}x more); every TP rank holds the "
                              "whole latent, so it is not divided by TP",
                              m.n_heads, m.n_layers, m.n_heads, m.v_dim(), in.kv.bytes_per_elem(), num(naive),
                              naive / d(f.bytes_per_token)));
  } else if (v_format(in).name != in.kv.name) {  // -ctk / -ctv: K and V each in its own type
    const KvFormat& v = v_format(in);
    out.push_back(fmt::format("  {} layers x {} KV heads x (K {} x {:g} B ({}) + V {} x {:g} B ({})) = {} B",
                              f.n_layers, f.kv_heads, f.k_dim, in.kv.bytes_per_elem(), in.kv.name, f.v_dim,
                              v.bytes_per_elem(), v.name, num(d(f.bytes_per_token))));
  } else if (f.k_dim == f.v_dim) {
    out.push_back(fmt::format("  2 (K and V) x {} layers x {} KV heads x {} head_dim x {} = {} B ({:.0f} KiB)",
                              f.n_layers, f.kv_heads, f.k_dim, eb, num(d(f.bytes_per_token)), d(f.bytes_per_token) / 1024));
  } else {
    out.push_back(fmt::format("  {} layers x {} KV heads x (K {} + V {}) x {} = {} B", f.n_layers, f.kv_heads,
                              f.k_dim, f.v_dim, eb, num(d(f.bytes_per_token))));
  }
  if (!f.mla && m.n_heads != m.n_kv_heads) {
    const double wrong = d(f.bytes_per_token) * static_cast<double>(m.n_heads) / static_cast<double>(m.n_kv_heads);
    out.push_back(fmt::format("  correction: the cache holds the {} KV heads, not the {} attention heads; counting "
                              "attention heads gives {} B per token and {} for {} tokens x {}, {:g}x too much",
                              m.n_kv_heads, m.n_heads, num(wrong),
                              gib_gb(wrong * static_cast<double>(in.ctx * in.batch)), num(static_cast<double>(in.ctx)),
                              sequence_count(in.batch), static_cast<double>(m.n_heads / m.n_kv_heads)));
  }
  for (const KvFormat* t : {&in.kv, &v_format(in)}) {
    if (t != &in.kv && t->name == in.kv.name) break;  // one type: said once
    out.push_back(fmt::format("  {} is {} bits = {:g} bytes per element; bits are not bytes", t->name,
                              t->bytes_per_elem() * 8, t->bytes_per_elem()));
  }
  if (in.tp > 1)
    out.push_back(fmt::format("  per GPU under TP {}: {} = {} B per token{}", in.tp,
                              f.mla ? "the whole latent" : fmt::format("{} KV heads", f.kv_heads_per_gpu),
                              num(d(f.bytes_per_token_per_gpu)),
                              f.replicated && !f.mla ? " (KV heads replicated: TP exceeds the KV heads)" : ""));

  out.push_back("KV cache per sequence (linear in context; attention compute, not the cache, is quadratic):");
  int64_t windowed = 0;
  for (int64_t l = 0; l < m.n_layers; ++l) windowed += m.layer_window(l) > 0 ? 1 : 0;
  if (windowed > 0) {
    const char* rule = in.engine == Engine::Llamacpp
                           ? "pad256(min(cells, window x sequences + n_ubatch)) cells (iSWA)"
                       : in.engine == Engine::Llmctl
                           ? "the blocks of window + -b batch tokens per sequence"
                           : "min(ctx, window) tokens";
    out.push_back(fmt::format("  sliding window {} on {} of {} layers: those keep {}",
                              m.sliding_window, windowed, m.n_layers, rule));
  }
  out.push_back(fmt::format("  {} tokens (in blocks of {}) -> {} per sequence per GPU; x {} per replica = {}",
                            num(static_cast<double>(in.ctx)), p.block_size, gib_gb(d(p.kv_bytes_per_seq)),
                            sequence_count(p.batch_per_replica), gib_gb(d(p.kv_bytes_needed))));

  out.push_back("Weights:");
  const ParamCounts& pc = p.params;
  out.push_back(fmt::format("  {} parameters (embedding {}, lm_head {}{}, layers {}, norms/biases {})",
                            num(static_cast<double>(pc.total())), num(static_cast<double>(pc.embedding)),
                            num(static_cast<double>(pc.lm_head)), m.tied_embeddings ? ", tied" : "",
                            num(static_cast<double>(pc.linear)), num(static_cast<double>(pc.small))));
  if (m.is_moe())
    out.push_back(fmt::format("  MoE: all {} experts of every layer are resident; {} parameters are active per token "
                              "(top-{}{}), which sets the FLOPs",
                              m.n_experts, count_text(static_cast<double>(pc.active_matmul)), m.n_experts_used,
                              m.n_shared_experts > 0   ? fmt::format(" + {} shared", m.n_shared_experts)
                              : m.n_ff_shared > 0      ? fmt::format(" + a shared expert of {}", m.n_ff_shared)
                                                       : ""));
  if (in.weight.from_file)
    out.push_back(fmt::format("  as stored in the GGUF file: {} B of tensors = {}; per GPU (TP {}) {}",
                              num(d(p.weights_bytes)), gib_gb(d(p.weights_bytes)), in.tp,
                              gib_gb(d(p.weights_bytes_per_gpu))));
  else
    out.push_back(fmt::format("  as {} ({:g} bytes per layer weight{}) = {}; per GPU (TP {}) {}", in.weight.name,
                              in.weight.bytes_per_param, in.weight.embeddings_16bit ? ", embeddings 16-bit" : "",
                              gib_gb(d(p.weights_bytes)), in.tp, gib_gb(d(p.weights_bytes_per_gpu))));

  out.push_back(fmt::format("Budget per GPU ({} rule):", engine_name(in.engine)));
  out.push_back(fmt::format("  {} usable memory: {} as cudaMemGetInfo reports it; the box says {:g} GB, which is "
                            "not what an engine can allocate",
                            in.gpu.label, gib_gb(d(p.usable_bytes)), in.gpu.marketed_gb));
  if (p.kv_budget_given) {
    out.push_back(fmt::format("  KV memory given: {}", gib_gb(static_cast<double>(p.kv_budget_bytes))));
  } else if (in.engine == Engine::Llamacpp) {
    out.push_back(fmt::format("  KV = usable {} - weights {} - compute buffer {} - CUDA context {} = {}",
                              gib_gb(d(p.usable_bytes)), gib_gb(d(p.weights_bytes_per_gpu)),
                              gib_gb(d(p.activation_bytes)), gib_gb(d(p.overhead_bytes)),
                              gib_gb(static_cast<double>(p.kv_budget_bytes))));
  } else {
    out.push_back(fmt::format("  requested = gpu_util {:g} x {:.2f} GiB = {:.2f} GiB", in.gpu_util, d(p.usable_bytes) / kGiB,
                              d(p.requested_bytes) / kGiB));
    out.push_back(fmt::format("  KV = {:.2f} - weights {:.2f} - peak activation {:.2f} - non-torch {:.2f} = {:.2f} GiB",
                              d(p.requested_bytes) / kGiB, d(p.weights_bytes_per_gpu) / kGiB, d(p.activation_bytes) / kGiB,
                              d(p.overhead_bytes) / kGiB, static_cast<double>(p.kv_budget_bytes) / kGiB));
  }
  out.push_back(fmt::format("  blocks = floor(KV / ({} tokens x {} B)) = {}; tokens = {} x {} = {}", p.block_size,
                            num(d(p.kv.bytes_per_token_per_gpu)), num(static_cast<double>(p.kv_blocks)),
                            num(static_cast<double>(p.kv_blocks)), p.block_size, num(static_cast<double>(p.kv_tokens))));
  out.push_back(fmt::format("  concurrency at {} tokens = {:.2f}x; whole sequences: {}", num(static_cast<double>(in.ctx)),
                            p.concurrency_ratio, p.max_concurrency));

  out.push_back("Speed (roofline, an upper bound):");
  out.push_back(fmt::format("  decode step reads {} per GPU (weights{} + KV of {}) / {:g} GB/s = {:.3g} ms{}",
                            gib_gb(r.decode_bytes_per_step), m.is_moe() ? " of the experts touched" : "",
                            sequence_count(p.batch_per_replica), in.gpu.bandwidth_gbs, r.decode_step_s * 1e3,
                            r.decode_memory_bound ? "" : " (compute bound)"));
  out.push_back(fmt::format("  prefill of {} tokens: 2 x {} active params x tokens + causal attention {:.3g} FLOPs "
                            "= {:.3g} FLOPs / ({} x {:g} TFLOPS) = {:.3f} s",
                            num(static_cast<double>(in.ctx)), count_text(static_cast<double>(p.params.active_matmul)),
                            r.prefill_attention_flops, r.prefill_flops, in.tp, r.tflops_used, r.prefill_s));
  return out;
}

}  // namespace llmctl::plan
