#include "plan/roofline.h"

#include <algorithm>
#include <cmath>

namespace llmctl::plan {

double expected_experts_touched(int64_t n_experts, int64_t top_k, int64_t tokens) {
  if (n_experts <= 0) return 0;
  const auto e = static_cast<double>(n_experts);
  const double miss = 1.0 - static_cast<double>(top_k) / e;
  return e * (1.0 - std::pow(miss, static_cast<double>(tokens)));
}

namespace {

// Per head, per (query, key) pair: QK^T costs 2 * k_dim FLOPs and AV 2 * v_dim.
double pair_flops(const ModelConfig& m) {
  const auto k = static_cast<double>(m.head_dim), v = static_cast<double>(m.v_dim());
  return 2.0 * (k + v) * static_cast<double>(m.n_heads);
}

// Number of (query, key) pairs in a causal prompt of n tokens with window w (0: full).
double causal_pairs(int64_t n, int64_t w) {
  const auto N = static_cast<double>(n);
  if (w <= 0 || w >= n) return N * (N + 1) / 2;
  const auto W = static_cast<double>(w);
  return W * (W + 1) / 2 + (N - W) * W;
}

}  // namespace

double prefill_attention_flops(const ModelConfig& m, int64_t ctx) {
  double pairs = 0;
  for (int64_t l = 0; l < m.n_layers; ++l) pairs += causal_pairs(ctx, m.layer_window(l));
  return pairs * pair_flops(m);
}

Roofline roofline(const PlanInputs& in, const MemoryPlan& p) {
  Roofline r;
  const ModelConfig& m = in.model;
  const bool fp8 = in.weight.fp8_compute && in.gpu.tflops_8 > 0;
  r.tflops_used = fp8 ? in.gpu.tflops_8 : in.gpu.tflops_16;
  const auto tp = static_cast<double>(in.tp);
  const auto b = static_cast<double>(p.batch_per_replica);

  // Weights read per step: MoE layers only stream the experts this batch routes to.
  double weights = static_cast<double>(p.weights_bytes_per_gpu);
  if (m.is_moe() && p.params.expert_linear > 0) {
    const double frac_resident_experts =
        static_cast<double>(p.params.expert_linear) / static_cast<double>(p.params.total());
    const double touched = expected_experts_touched(m.n_experts, m.n_experts_used, p.batch_per_replica) /
                           static_cast<double>(m.n_experts);
    weights *= 1.0 - frac_resident_experts * (1.0 - touched);
  }
  r.decode_bytes_per_step = weights + static_cast<double>(p.kv_bytes_needed);
  // Decode attention: each new token attends to every cached key of its sequence.
  double keys = 0;
  for (int64_t l = 0; l < m.n_layers; ++l) {
    const int64_t w = m.layer_window(l);
    keys += static_cast<double>(w > 0 ? std::min(in.ctx, w) : in.ctx);
  }
  const double flops_per_token = 2.0 * static_cast<double>(p.params.active_matmul) + keys * pair_flops(m);
  r.decode_flops_per_step = b * flops_per_token / tp;
  const double t_mem = r.decode_bytes_per_step / (in.gpu.bandwidth_gbs * 1e9);
  const double t_compute = r.decode_flops_per_step / (r.tflops_used * 1e12);
  r.decode_step_s = std::max(t_mem, t_compute);
  r.decode_memory_bound = t_mem >= t_compute;
  r.decode_tok_s_per_seq = 1.0 / r.decode_step_s;
  r.decode_tok_s = b * static_cast<double>(p.replicas) / r.decode_step_s;

  r.prefill_attention_flops = prefill_attention_flops(m, in.ctx);
  r.prefill_flops = 2.0 * static_cast<double>(p.params.active_matmul) * static_cast<double>(in.ctx) +
                    r.prefill_attention_flops;
  // Prefill streams the weights at least once; it is compute bound for any real prompt.
  const double t_pf_compute = r.prefill_flops / (tp * r.tflops_used * 1e12);
  const double t_pf_mem = static_cast<double>(p.weights_bytes_per_gpu) / (in.gpu.bandwidth_gbs * 1e9);
  r.prefill_s = std::max(t_pf_compute, t_pf_mem);
  return r;
}

}  // namespace llmctl::plan
