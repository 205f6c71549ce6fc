#pragma once
// Roofline speed estimates: upper bounds from the GPU's peak bandwidth and matrix rate.
//   decode step time = max(bytes read / bandwidth, FLOPs / peak) per GPU, where a step reads
//     this GPU's weights (MoE: only the experts the batch touches) and every sequence's KV;
//   prefill time = FLOPs / peak, with FLOPs = 2 * active parameters * tokens plus causal
//     attention (QK^T and AV over the lower triangle, sliding windows honoured).

#include <cstdint>

#include "plan/memory_plan.h"

namespace llmctl::plan {

struct Roofline {
  double tflops_used = 0;           // per GPU, the rate the weight type runs at
  double decode_bytes_per_step = 0;  // per GPU
  double decode_flops_per_step = 0;  // per GPU
  double decode_step_s = 0;
  bool decode_memory_bound = true;
  double decode_tok_s = 0;          // aggregate over the batch and replicas
  double decode_tok_s_per_seq = 0;
  double prefill_flops = 0;         // one sequence of ctx tokens, whole model
  double prefill_attention_flops = 0;
  double prefill_s = 0;             // on one TP group
};

// Expected number of distinct experts `tokens` tokens route to (top-k of E, uniform routing).
double expected_experts_touched(int64_t n_experts, int64_t top_k, int64_t tokens);
// Causal attention FLOPs of a prompt of `ctx` tokens (QK^T and AV), whole model.
double prefill_attention_flops(const ModelConfig& m, int64_t ctx);
Roofline roofline(const PlanInputs& in, const MemoryPlan& p);

}  // namespace llmctl::plan
