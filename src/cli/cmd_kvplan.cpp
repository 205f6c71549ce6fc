// llmctl kvplan: what fits on a GPU (weights, KV cache, workspace), how many sequences at what
// context, and how fast (roofline). Parses options, calls src/plan, prints.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>

#include "cli/app.h"
#include "cli/kvplan_report.h"
#include "core/error.h"
#include "core/output_file.h"
#include "model/arch.h"
#include "plan/explain.h"
#include "plan/memory_plan.h"
#include "plan/roofline.h"

namespace llmctl::cli {

namespace {

struct KvplanOptions {
  std::string model, gpu, weight_type, kv_type = "f16", engine = "llmctl", svg;
  std::optional<double> gpu_mem, bandwidth, tflops, kv_budget, activation, non_torch;
  int64_t ctx = 0, batch = 1, block_size = 16, group_size = 128;
  std::optional<int64_t> tp, gpus;
  int64_t max_batched_tokens = 8192, max_num_seqs = 1024;
  double gpu_util = 0.9;
  bool json = false, explain = false, no_sweep = false, measure = false, list_models = false, list_gpus = false;
};

uint64_t gib_to_bytes(double g) { return static_cast<uint64_t>(std::llround(g * plan::kGiB)); }

plan::PlanInputs build_inputs(const KvplanOptions& o) {
  plan::PlanInputs in;
  if (o.model.empty()) throw CLI::ValidationError("--model", "give --model NAME|FILE (see --list-models)");
  in.model = plan::load_model(o.model, arch_window_pattern);  // windowed layers: arch.h
  if (!o.gpu.empty() && o.gpu_mem) throw CLI::ValidationError("--gpu", "give --gpu NAME or --gpu-mem, not both");
  if (o.gpu_mem) {
    if (!o.bandwidth || !o.tflops)
      throw CLI::ValidationError("--gpu-mem", "a custom GPU needs --gpu-mem GiB, --bandwidth GB/s and --tflops X");
    if (*o.gpu_mem <= 0 || *o.bandwidth <= 0 || *o.tflops <= 0)
      throw CLI::ValidationError("--gpu-mem", "--gpu-mem, --bandwidth and --tflops must be positive");
    in.gpu = plan::custom_gpu(*o.gpu_mem, *o.bandwidth, *o.tflops);
  } else {
    in.gpu = plan::find_gpu(o.gpu.empty() ? "h100-sxm" : o.gpu);
    if (o.bandwidth) in.gpu.bandwidth_gbs = *o.bandwidth;
    if (o.tflops) in.gpu.tflops_16 = *o.tflops;
  }
  if (!(o.gpu_util > 0 && o.gpu_util <= 1))
    throw CLI::ValidationError("--gpu-util", fmt::format("--gpu-util must be in (0, 1], got {}", o.gpu_util));
  // --tp alone means that many GPUs; --gpus alone means TP over all of them.
  in.n_gpus = o.gpus ? *o.gpus : (o.tp ? *o.tp : 1);
  in.tp = o.tp ? *o.tp : in.n_gpus;
  if (in.tp < 1 || in.n_gpus % in.tp != 0)
    throw CLI::ValidationError("--tp", fmt::format("--tp {} must divide --gpus {}", in.tp, in.n_gpus));
  if (const std::string why = plan::check_tensor_parallel(in.model, in.tp); !why.empty())
    throw CLI::ValidationError("--tp", why);
  const std::string wt = !o.weight_type.empty() ? o.weight_type : (in.model.file_weight_bytes > 0 ? "gguf" : "bf16");
  in.weight = plan::parse_weight_format(wt, o.group_size);
  in.kv = plan::parse_kv_format(o.kv_type);
  in.engine = plan::parse_engine(o.engine);
  in.ctx = o.ctx > 0 ? o.ctx : (in.model.max_ctx > 0 ? std::min<int64_t>(in.model.max_ctx, 8192) : 4096);
  // Keep byte counts far from overflow: 2^31 tokens x 2^20 sequences x MB per token < 2^63 is
  // not guaranteed, so cap each to a range no deployment reaches.
  if (in.ctx > (int64_t{1} << 31)) throw CLI::ValidationError("--ctx", "--ctx must be at most 2^31 tokens");
  if (o.batch > (int64_t{1} << 20)) throw CLI::ValidationError("--batch", "--batch must be at most 2^20");
  in.batch = o.batch;
  in.block_size = o.block_size;
  in.gpu_util = o.gpu_util;
  in.max_batched_tokens = o.max_batched_tokens;
  in.max_num_seqs = o.max_num_seqs;
  auto nonneg = [](const std::optional<double>& v, const char* name) -> std::optional<uint64_t> {
    if (!v) return std::nullopt;
    if (*v < 0) throw CLI::ValidationError(name, fmt::format("{} must not be negative", name));
    return gib_to_bytes(*v);
  };
  in.kv_budget = nonneg(o.kv_budget, "--kv-budget");
  in.activation = nonneg(o.activation, "--activation");
  in.overhead = nonneg(o.non_torch, "--non-torch");
  return in;
}

int run_kvplan(const KvplanOptions& o) {
  if (o.list_models) {
    print_model_list();
    return kExitOk;
  }
  if (o.list_gpus) {
    print_gpu_list();
    return kExitOk;
  }
  const auto t0 = std::chrono::steady_clock::now();
  const plan::PlanInputs in = build_inputs(o);
  const plan::MemoryPlan p = plan::plan_memory(in);
  const plan::Roofline r = plan::roofline(in, p);
  if (o.measure) return run_kvplan_measure(in, p, o.json);
  if (!o.svg.empty()) {
    write_output_file(o.svg, kvplan_svg(in, p));
  }
  if (o.json) {
    nlohmann::ordered_json j = kvplan_json(in, p, r, !o.no_sweep);
    if (o.explain) j["explain"] = plan::explain_plan(in, p, r);
    fmt::print("{}\n", j.dump(2));
    return kExitOk;
  }
  print_kvplan_text(in, p, r, !o.no_sweep);
  if (o.explain) {
    fmt::print("\nexplain\n");
    for (const std::string& line : plan::explain_plan(in, p, r)) fmt::print("{}\n", line);
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  fmt::print("\nplanned in {:.1f} ms from metadata only ({})\n", ms, in.model.source);
  return kExitOk;
}

}  // namespace

void add_kvplan_command(CLI::App& app, Action& action) {
  static KvplanOptions opt;
  CLI::App* sub = app.add_subcommand(
      "kvplan", "Plan GPU memory: weights, KV cache, workspace, what fits, roofline speed");
  sub->footer(
      "Examples:\n"
      "  Does Llama-3.1-70B in FP8 fit on two H100s at 32k context with 16 users?\n"
      "    llmctl kvplan --model llama-3.1-70b --weight-type fp8 --gpu h100-sxm --gpus 2 --ctx 32768 --batch 16\n"
      "  llmctl kvplan --model llama-3.1-8b --gpu h100-sxm --engine vllm --gpu-util 0.95 --explain\n"
      "  llmctl kvplan --model model.gguf --gpu rtx-4090 --engine llamacpp --ctx 8192 --json\n"
      "  llmctl kvplan --model path/to/config.json --gpu-mem 40 --bandwidth 1500 --tflops 300 --svg mem.svg\n"
      "\nMemory is per GPU; GiB = 2^30 bytes. --model takes a catalog name (--list-models), a .gguf file\n"
      "(metadata only) or a Hugging Face config.json. Speeds are roofline upper bounds.\n"
      "Exit codes: 0 ok (also when the plan does not fit; see \"fits\"), 1 error, 2 usage error.");
  sub->add_option("-m,--model", opt.model, "Catalog name, .gguf file or Hugging Face config.json");
  sub->add_option("--gpu", opt.gpu, "GPU from the catalog (--list-gpus); default h100-sxm");
  sub->add_option("--gpu-mem", opt.gpu_mem, "Custom GPU: usable memory in GiB (as cudaMemGetInfo reports)");
  sub->add_option("--bandwidth", opt.bandwidth, "Custom GPU: memory bandwidth in GB/s");
  sub->add_option("--tflops", opt.tflops, "Custom GPU: dense 16-bit tensor TFLOPS");
  sub->add_option("--gpus", opt.gpus, "Number of GPUs (default 1)")->check(CLI::PositiveNumber);
  sub->add_option("--tp", opt.tp, "Tensor-parallel size (default: --gpus); the rest are replicas")
      ->check(CLI::PositiveNumber);
  sub->add_option("--weight-type", opt.weight_type,
                  "f32 f16 bf16 fp8 int8 q8_0 q4_0 q4_k int4|gptq|awq (int4-gN) gguf (default bf16; gguf for a .gguf)");
  sub->add_option("--group-size", opt.group_size, "Group size of int4/GPTQ/AWQ weights (default 128)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--kv-type", opt.kv_type, "KV cache type: f32 f16 bf16 fp8 q8_0 q4_0 (default f16)");
  sub->add_option("--ctx", opt.ctx, "Context per sequence in tokens (default min(model max, 8192))")
      ->check(CLI::PositiveNumber);
  sub->add_option("--batch", opt.batch, "Concurrent sequences (default 1)")->check(CLI::PositiveNumber);
  sub->add_option("--block-size", opt.block_size, "KV block size in tokens (default 16)")->check(CLI::PositiveNumber);
  sub->add_option("--gpu-util", opt.gpu_util, "Fraction of GPU memory the engine may take, in (0, 1] (default 0.9)");
  sub->add_option("--engine", opt.engine, "Budget rule: llmctl, vllm, llamacpp (default llmctl)");
  sub->add_option("--kv-budget", opt.kv_budget, "GiB per GPU left for the KV cache, when already known");
  sub->add_option("--activation", opt.activation, "GiB per GPU of peak activation (overrides the estimate)");
  sub->add_option("--non-torch", opt.non_torch, "GiB per GPU of non-torch memory / CUDA context (overrides the default)");
  sub->add_option("--max-batched-tokens", opt.max_batched_tokens, "vLLM max_num_batched_tokens (default 8192)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--max-num-seqs", opt.max_num_seqs, "vLLM max_num_seqs (default 1024)")->check(CLI::PositiveNumber);
  sub->add_flag("--json", opt.json, "JSON output");
  sub->add_option("--svg", opt.svg, "Write a chart of memory per GPU against context to FILE");
  sub->add_flag("--explain", opt.explain, "Show the formulas with their numbers, and common published errors");
  sub->add_flag("--no-sweep", opt.no_sweep, "Leave out the sweep over contexts and batches");
  sub->add_flag("--measure", opt.measure, "Allocate the planned weights and KV cache (CPU) and print measured vs predicted");
  sub->add_flag("--list-models", opt.list_models, "List the model catalog");
  sub->add_flag("--list-gpus", opt.list_gpus, "List the GPU catalog");
  sub->callback([&action] { action = [] { return run_kvplan(opt); }; });
}

}  // namespace llmctl::cli
