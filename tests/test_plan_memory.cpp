// kvplan memory plans against numbers real engines logged (issue 5), and the architecture
// rules: GQA/MQA, MLA, sliding windows, MoE, tensor parallelism, block rounding.
#include <catch2/catch.hpp>

#include "plan/memory_plan.h"
#include "plan/roofline.h"

using namespace llmctl::plan;

namespace {

constexpr double GiB = 1024.0 * 1024.0 * 1024.0;
constexpr uint64_t MiB = 1024 * 1024;

PlanInputs inputs(const char* model, const char* gpu = "h100-sxm") {
  PlanInputs in;
  in.model = find_model(model);
  in.gpu = find_gpu(gpu);
  in.weight = parse_weight_format("bf16");
  in.kv = parse_kv_format("f16");
  return in;
}

uint64_t gib(double g) { return static_cast<uint64_t>(g * GiB); }

}  // namespace

// vLLM 0.19, Llama-3.1-8B-Instruct bf16, one H100 (79.19 GiB), gpu_memory_utilization 0.95:
// requested 75.23 GiB; weights 14.99, peak activation 1.89, non-torch 0.25 -> 58.11 GiB of KV
// -> 29,751 blocks of 16 -> 476,016 tokens; maximum concurrency for 8,192 tokens: 58.11x.
TEST_CASE("vLLM log: Llama-3.1-8B on one H100 from the logged KV memory", "[cpu][plan][golden]") {
  PlanInputs in = inputs("llama-3.1-8b");
  in.engine = Engine::Vllm;
  in.gpu_util = 0.95;
  in.ctx = 8192;
  in.kv_budget = gib(58.11);
  const MemoryPlan p = plan_memory(in);
  CHECK(p.kv.bytes_per_token == 131072);
  CHECK(p.kv_blocks >= 29750);  // 58.11 is rounded in the log: +-1 block
  CHECK(p.kv_blocks <= 29752);
  CHECK(p.kv_tokens == p.kv_blocks * 16);
  CHECK(std::abs(p.kv_tokens - 476016) <= 16);
  CHECK(p.concurrency_ratio == Approx(58.11).margin(0.01));
  CHECK(p.max_concurrency == 58);
}

TEST_CASE("vLLM log: Llama-3.1-8B on one H100, full prediction", "[cpu][plan][golden]") {
  PlanInputs in = inputs("llama-3.1-8b");
  in.engine = Engine::Vllm;
  in.gpu_util = 0.95;
  in.ctx = 8192;
  const MemoryPlan p = plan_memory(in);
  CHECK(static_cast<double>(p.requested_bytes) / GiB == Approx(75.23).margin(0.01));
  CHECK(static_cast<double>(p.weights_bytes) / GiB == Approx(14.99).epsilon(0.01));
  CHECK(static_cast<double>(p.activation_bytes) / GiB == Approx(1.89).epsilon(0.05));
  CHECK(static_cast<double>(p.kv_budget_bytes) / GiB == Approx(58.11).epsilon(0.05));
  CHECK(static_cast<double>(p.kv_blocks) == Approx(29751).epsilon(0.05));
  CHECK(p.fits);
}

// vLLM, Meta-Llama-3-8B, one H100 reporting 79.22 GiB, utilisation 0.90: 71.29 GiB usable;
// weights 14.96, non-torch 1.79, activation 1.26 -> 53.29 GiB of KV.
TEST_CASE("vLLM log: Meta-Llama-3-8B on one H100 at 0.90", "[cpu][plan][golden]") {
  PlanInputs in = inputs("llama-3-8b");
  in.gpu = custom_gpu(79.22, 3350, 989);
  in.engine = Engine::Vllm;
  in.gpu_util = 0.90;
  in.max_num_seqs = 256;  // that vLLM's default
  MemoryPlan p = plan_memory(in);
  CHECK(static_cast<double>(p.requested_bytes) / GiB == Approx(71.29).margin(0.01));
  CHECK(static_cast<double>(p.weights_bytes) / GiB == Approx(14.96).epsilon(0.01));
  CHECK(static_cast<double>(p.kv_budget_bytes) / GiB == Approx(53.29).epsilon(0.05));
  // With the logged activation and non-torch memory the rule reproduces the logged KV memory.
  in.activation = gib(1.26);
  in.overhead = gib(1.79);
  p = plan_memory(in);
  CHECK(static_cast<double>(p.kv_budget_bytes) / GiB == Approx(53.29).margin(0.015));
}

// The same log with -tp 2 (vllm-project/vllm#10511): "model weights take 7.48GiB" per GPU.
TEST_CASE("vLLM log: Meta-Llama-3-8B weights per GPU at TP 2", "[cpu][plan][golden]") {
  PlanInputs in = inputs("llama-3-8b");
  in.engine = Engine::Vllm;
  in.n_gpus = in.tp = 2;
  CHECK(static_cast<double>(plan_memory(in).weights_bytes_per_gpu) / GiB == Approx(7.48).epsilon(0.01));
}

// vLLM log for Qwen3-235B-A22B-FP8 on H200s, TP 4, gpu_memory_utilization 0.5
// (vllm-project/vllm#21429): requested 69.86 GiB, weights memory 55.13 GiB per rank.
TEST_CASE("vLLM log: Qwen3-235B-A22B FP8 weights per GPU at TP 4", "[cpu][plan][golden]") {
  PlanInputs in = inputs("qwen3-235b-a22b", "h200");
  in.engine = Engine::Vllm;
  in.weight = parse_weight_format("fp8");
  in.n_gpus = in.tp = 4;
  in.gpu_util = 0.5;
  const MemoryPlan p = plan_memory(in);
  CHECK(static_cast<double>(p.requested_bytes) / GiB == Approx(69.86).margin(0.01));
  CHECK(static_cast<double>(p.weights_bytes_per_gpu) / GiB == Approx(55.13).epsilon(0.01));
  CHECK(p.kv.bytes_per_token_per_gpu == 94 * 2 * 1 * 128 * 2);  // 4 KV heads over 4 ranks
}

// llama.cpp logs: "KV self size = 256.00 MiB" (Mistral-7B, n_ctx 2048, f16) and 1024.00 MiB
// (Llama-2-7B, n_ctx 2048).
TEST_CASE("llama.cpp log: KV size at context 2048 with f16 K and V", "[cpu][plan][golden]") {
  PlanInputs in = inputs("mistral-7b", "rtx-4090");
  in.engine = Engine::Llamacpp;
  in.weight = parse_weight_format("q4_0");
  in.ctx = 2048;
  CHECK(plan_memory(in).kv_bytes_needed == 256 * MiB);
  in.ctx = 2000;  // cells are padded to 256
  CHECK(plan_memory(in).kv_bytes_needed == 256 * MiB);
  in.model = find_model("llama-2-7b");
  in.ctx = 2048;
  const MemoryPlan p = plan_memory(in);
  CHECK(p.kv_bytes_needed == 1024 * MiB);
  CHECK(p.block_size == 256);
  CHECK(p.kv_tokens % 256 == 0);
}

// TensorRT-LLM log: 132,608 tokens of a 7B MHA model's fp16 KV take 69,524,783,104 bytes
// (tokens_per_block 64).
TEST_CASE("TensorRT-LLM log: 7B MHA KV tokens from bytes", "[cpu][plan][golden]") {
  PlanInputs in = inputs("llama-2-7b");
  in.block_size = 64;
  in.kv_budget = 69524783104ull;
  const MemoryPlan p = plan_memory(in);
  CHECK(p.kv.bytes_per_token == 524288);
  CHECK(p.kv_blocks == 2072);
  CHECK(p.kv_tokens == 132608);
}

// A widely read article: Llama-3-8B, 4,096 tokens, FP16 KV, batch 1 needs 0.5 GiB (2 * 32 * 8
// * 128 * 2 bytes per token), not 2.1 GB; its FP16 weights take about 14.96 GiB.
TEST_CASE("the article's Llama-3-8B example", "[cpu][plan][golden]") {
  PlanInputs in = inputs("llama-3-8b");
  in.weight = parse_weight_format("f16");
  in.ctx = 4096;
  const MemoryPlan p = plan_memory(in);
  CHECK(p.kv.bytes_per_token == 2 * 32 * 8 * 128 * 2);
  CHECK(p.kv_bytes_needed == 512 * MiB);
  CHECK(static_cast<double>(p.weights_bytes) / GiB == Approx(14.96).margin(0.005));
}

TEST_CASE("KV types price whole quantization blocks", "[cpu][plan]") {
  PlanInputs in = inputs("llama-2-7b");
  in.kv = parse_kv_format("q8_0");
  CHECK(plan_memory(in).kv.bytes_per_token == 32 * 2 * (4096 / 32) * 34);
  in.kv = parse_kv_format("q4_0");
  CHECK(plan_memory(in).kv.bytes_per_token == 32 * 2 * (4096 / 32) * 18);
  in.kv = parse_kv_format("fp8");
  CHECK(plan_memory(in).kv.bytes_per_token == 32 * 2 * 4096);
  CHECK_THROWS(parse_kv_format("q5_9"));
}

TEST_CASE("weight types: bytes per parameter", "[cpu][plan]") {
  CHECK(parse_weight_format("q4_0").bytes_per_param == 0.5625);
  CHECK(parse_weight_format("q8_0").bytes_per_param == 1.0625);
  CHECK(parse_weight_format("q4_k").bytes_per_param == 0.5625);
  CHECK(parse_weight_format("awq", 128).bytes_per_param == Approx(0.5 + 2.5 / 128));
  CHECK(parse_weight_format("int4-g32").group_size == 32);
  CHECK(parse_weight_format("fp8").embeddings_16bit);
  // Llama-3.1-70B FP8 (embeddings and lm_head in bf16): about 72.7 GB of checkpoint.
  const ModelConfig m = find_model("llama-3.1-70b");
  CHECK(static_cast<double>(weights_bytes_total(m, parse_weight_format("fp8"))) == Approx(72.7e9).epsilon(0.01));
  CHECK_THROWS(parse_weight_format("int3"));
}

TEST_CASE("tensor parallelism splits KV heads, and replicates them past the KV head count", "[cpu][plan]") {
  PlanInputs in = inputs("llama-3.1-70b");
  in.n_gpus = in.tp = 2;
  MemoryPlan p = plan_memory(in);
  CHECK(p.kv.bytes_per_token == 80 * 2 * 8 * 128 * 2);
  CHECK(p.kv.bytes_per_token_per_gpu == 80 * 2 * 4 * 128 * 2);
  in.n_gpus = in.tp = 16;  // 8 KV heads over 16 ranks: each rank keeps one whole head
  p = plan_memory(in);
  CHECK(p.kv.replicated);
  CHECK(p.kv.bytes_per_token_per_gpu == 80 * 2 * 1 * 128 * 2);
  CHECK(check_tensor_parallel(find_model("llama-3.1-70b"), 3) != "");
  CHECK(check_tensor_parallel(find_model("qwen2.5-7b"), 8) != "");  // 28 heads
  CHECK(check_tensor_parallel(find_model("qwen2.5-7b"), 4) == "");
  // Weights: about half per GPU at TP 2.
  in.n_gpus = in.tp = 2;
  p = plan_memory(in);
  CHECK(static_cast<double>(p.weights_bytes_per_gpu) == Approx(static_cast<double>(p.weights_bytes) / 2).epsilon(0.01));
  // Data parallel: 4 GPUs at TP 2 are two replicas, each with half the sequences.
  in.n_gpus = 4;
  in.batch = 16;
  p = plan_memory(in);
  CHECK(p.replicas == 2);
  CHECK(p.batch_per_replica == 8);
}

TEST_CASE("MLA caches the latent per layer and it is not split across TP ranks", "[cpu][plan]") {
  PlanInputs in = inputs("deepseek-v3", "h200");
  in.n_gpus = in.tp = 8;
  const MemoryPlan p = plan_memory(in);
  CHECK(p.kv.mla);
  CHECK(p.kv.bytes_per_token == 61 * (512 + 64) * 2);
  CHECK(p.kv.bytes_per_token_per_gpu == 61 * (512 + 64) * 2);
  in.model = find_model("deepseek-v2-lite");
  in.n_gpus = in.tp = 1;
  CHECK(plan_memory(in).kv.bytes_per_token == 27 * (512 + 64) * 2);
}

TEST_CASE("sliding-window layers keep at most the window", "[cpu][plan]") {
  PlanInputs in = inputs("mistral-7b");
  in.engine = Engine::Vllm;
  in.ctx = 32768;
  MemoryPlan p = plan_memory(in);
  CHECK(p.kv_bytes_per_seq == 4096ull * 131072);  // every layer slides over 4096
  // llmctl's cache: the window plus one forward pass (-b 512) of new positions, in blocks of 16:
  // ceil((4096 + 512 - 2) / 16) + 1 = 289 blocks.
  in.engine = Engine::Llmctl;
  CHECK(plan_memory(in).kv_bytes_per_seq == 289ull * 16 * 131072);
  // llama.cpp runs Mistral (a window on every layer, no pattern) as full attention.
  in.engine = Engine::Llamacpp;
  CHECK(plan_memory(in).kv_bytes_per_seq == 32768ull * 131072);
  in.model = find_model("gemma-2-9b");
  in.engine = Engine::Vllm;
  in.ctx = 8192;
  p = plan_memory(in);
  const uint64_t per_layer_token = 2 * 8 * 256 * 2;
  CHECK(p.kv_bytes_per_seq == 21 * 8192 * per_layer_token + 21 * 4096 * per_layer_token);
  // The longest context at batch 1 grows past what full attention would allow.
  CHECK(p.max_context > p.kv_tokens);
  in.engine = Engine::Llmctl;
  CHECK(plan_memory(in).kv_bytes_per_seq ==
        21 * 8192 * per_layer_token + 21 * 4624 * per_layer_token);
  // llama.cpp's iSWA cache: pad256(4096 + 512) = 4608 cells on the windowed layers.
  in.engine = Engine::Llamacpp;
  CHECK(plan_memory(in).kv_bytes_per_seq ==
        21 * 8192 * per_layer_token + 21 * 4608 * per_layer_token);
}

TEST_CASE("MoE: every expert is resident, active parameters drive FLOPs", "[cpu][plan]") {
  PlanInputs in = inputs("mixtral-8x7b");
  in.n_gpus = in.tp = 2;
  const MemoryPlan p = plan_memory(in);
  CHECK(static_cast<double>(p.weights_bytes) == Approx(46702792704.0 * 2).epsilon(0.001));
  const Roofline r = roofline(in, p);
  CHECK(r.prefill_flops > 2.0 * 12.0e9 * 4096);
  CHECK(r.prefill_flops < 2.0 * 14.0e9 * 4096 + r.prefill_attention_flops);
  CHECK(expected_experts_touched(8, 2, 1) == Approx(2.0));
  CHECK(expected_experts_touched(8, 2, 1000) == Approx(8.0));
}

TEST_CASE("MoE decode streams the experts the batch touches: active parameters at batch 1",
          "[cpu][plan]") {
  // Mixtral-8x7B by hand: 32 layers x 8 experts x (gate, up, down) 3 x 4096 x 14336 expert
  // parameters of 46,702,792,704; one token reads 2 of each layer's 8 experts, so a decode step
  // of one sequence streams 46,702,792,704 - 45,097,156,608 x 6/8 = 12,879,925,248 parameters
  // (the published 12.9B active), in bf16, and the KV cache.
  PlanInputs in = inputs("mixtral-8x7b");
  in.batch = 1;
  const MemoryPlan p = plan_memory(in);
  REQUIRE(p.batch_per_replica == 1);
  const double expert_params = 32.0 * 8 * 3 * 4096 * 14336;
  CHECK(expert_params == 45097156608.0);
  CHECK(static_cast<double>(p.weights_bytes_per_gpu) == Approx(46702792704.0 * 2).epsilon(1e-9));
  const Roofline one = roofline(in, p);
  CHECK(one.decode_bytes_per_step ==
        Approx(12879925248.0 * 2 + static_cast<double>(p.kv_bytes_needed)).epsilon(1e-9));
  CHECK(one.decode_flops_per_step ==
        Approx(2.0 * static_cast<double>(count_params(in.model).active_matmul) +
               32.0 * static_cast<double>(in.ctx) * 2.0 * (128 + 128) * 32)
            .epsilon(1e-9));
  // A batch of 64 touches all 8 experts of every layer (1 - (6/8)^64 ~ 1): every weight.
  in.batch = 64;
  const MemoryPlan p64 = plan_memory(in);
  CHECK(roofline(in, p64).decode_bytes_per_step ==
        Approx(static_cast<double>(p64.weights_bytes_per_gpu + p64.kv_bytes_needed)).epsilon(1e-6));
}

TEST_CASE("blocks round each sequence up", "[cpu][plan]") {
  PlanInputs in = inputs("llama-3.1-8b");
  in.ctx = 100;
  in.kv_budget = 16 * 131072 * 70;  // 70 blocks of 16
  const MemoryPlan p = plan_memory(in);
  CHECK(p.kv_bytes_per_seq == 112 * 131072);  // 7 blocks
  CHECK(p.kv_blocks == 70);
  CHECK(p.max_concurrency == 10);
  in.batch = 3;
  CHECK(plan_memory(in).max_context == 70 / 3 * 16);
}

TEST_CASE("does not fit: shortfall and levers", "[cpu][plan]") {
  PlanInputs in = inputs("llama-3.1-70b");
  in.weight = parse_weight_format("fp8");
  in.n_gpus = in.tp = 2;
  in.ctx = 32768;
  in.batch = 16;
  const MemoryPlan p = plan_memory(in);
  CHECK_FALSE(p.fits);
  // 16 x 32768 x 160 KiB per GPU = 80 GiB of KV against ~35 GiB left.
  CHECK(p.kv_bytes_needed == 16ull * 32768 * 163840);
  CHECK(p.shortfall_bytes / GiB > 40);
  REQUIRE(!p.levers.empty());
  bool kv_fp8 = false;
  for (const Lever& l : p.levers) kv_fp8 = kv_fp8 || l.what.find("--kv-type fp8") != std::string::npos;
  CHECK(kv_fp8);
  CHECK(p.levers.front().saves_bytes >= p.levers.back().saves_bytes);
}

TEST_CASE("roofline: decode from bytes per step, prefill from FLOPs", "[cpu][plan]") {
  PlanInputs in = inputs("llama-3.1-8b");
  in.ctx = 8192;
  const MemoryPlan p = plan_memory(in);
  const Roofline r = roofline(in, p);
  // One step reads all bf16 weights and the sequence's KV: 8,030,261,248 * 2 + 8192 * 131,072 B.
  const double bytes = 8030261248.0 * 2 + 8192.0 * 131072;
  CHECK(r.decode_tok_s == Approx(3350e9 / bytes).epsilon(0.001));
  // Prefill: 2 FLOPs per active weight (no embedding lookup) per token + causal attention:
  // 32 layers x 32 heads x (QK 2*128 + AV 2*128) x 8192*8193/2 pairs.
  const double matmul = 2.0 * (8030261248.0 - 128256.0 * 4096 - 65 * 4096) * 8192;
  const double attn = 32.0 * 32 * 512 * (8192.0 * 8193 / 2);
  CHECK(r.prefill_attention_flops == Approx(attn));
  CHECK(r.prefill_s == Approx((matmul + attn) / 989e12).epsilon(0.001));
}
