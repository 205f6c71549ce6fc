// llmctl kvplan: what fits on a GPU (weights, KV cache, workspace), how many sequences at what
// context, and how fast (roofline). Parses options, calls src/plan, prints.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>

#include "cli/app.h"
#include "cli/cli_style.h"
#include "cli/engine_options.h"  // resolve_kv_types
#include "cli/kvplan_model.h"
#include "cli/kvplan_report.h"
#include "core/error.h"
#include "core/output_file.h"
#include "plan/explain.h"
#include "plan/memory_plan.h"
#include "plan/roofline.h"

namespace llmctl::cli {

namespace {

struct KvplanOptions {
  std::string model, gpu, weight_type, kv_type = "f16", engine = "llmctl", svg;
  std::optional<double> gpu_mem, bandwidth, tflops, kv_budget, activation, non_torch;
  int64_t ctx = 0, parallel = 1, block_size = 16, group_size = 128;
  std::optional<int64_t> batch;  // --batch: the deprecated name of --parallel
  std::optional<std::string> cache_type_k, cache_type_v;  // llama.cpp's -ctk, -ctv
  std::optional<int64_t> tp, gpus;
  int64_t max_batched_tokens = 8192, max_num_seqs = 1024;
  double gpu_util = 0.9;
  bool kv_type_given = false;  // --kv-type on the command line (then -ctk/-ctv must agree)
  bool json = false, explain = false, no_sweep = false, measure = false, list_models = false, list_gpus = false;
};


uint64_t gib_to_bytes(double g) { return static_cast<uint64_t>(std::llround(g * plan::kGiB)); }

plan::PlanInputs build_inputs(const KvplanOptions& o) {
  plan::PlanInputs in;
  if (o.model.empty()) throw CLI::ValidationError("--model", "give --model NAME|FILE (see --list-models)");
  in.model = plan::load_model(o.model, kvplan_model_readers());  // the engine's GGUF reader
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
  // --tp alone means that many GPUs; --gpus alone means TP over all of them.
  in.n_gpus = o.gpus ? *o.gpus : (o.tp ? *o.tp : 1);
  in.tp = o.tp ? *o.tp : in.n_gpus;
  if (in.tp < 1 || in.n_gpus % in.tp != 0)
    throw CLI::ValidationError("--tp", fmt::format("--tp {} must divide --gpus {}", in.tp, in.n_gpus));
  if (const std::string why = plan::check_tensor_parallel(in.model, in.tp); !why.empty())
    throw CLI::ValidationError("--tp", why);
  const std::string wt = !o.weight_type.empty() ? o.weight_type : (in.model.file_weight_bytes > 0 ? "gguf" : "bf16");
  in.weight = plan::parse_weight_format(wt, o.group_size);
  // --kv-type (vLLM's --kv-cache-dtype: "auto" is the model's 16-bit type) holds K and V;
  // llama.cpp's -ctk / -ctv one each, by run's rule.
  const KvTypeNames kv = resolve_kv_types(o.kv_type == "auto" ? "f16" : o.kv_type, o.kv_type_given,
                                          o.cache_type_k, o.cache_type_v);
  in.kv = plan::parse_kv_format(kv.k);
  if (kv.v != kv.k) in.kv_v = plan::parse_kv_format(kv.v);
  in.engine = plan::parse_engine(o.engine);
  in.ctx = o.ctx > 0 ? o.ctx : (in.model.max_ctx > 0 ? std::min<int64_t>(in.model.max_ctx, 8192) : 4096);
  // -c (<= 2^31) and --parallel (<= 2^20) are capped at parsing: byte counts stay far from
  // overflow in a range no deployment reaches.
  in.batch = o.parallel;
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
      "    llmctl kvplan --model llama-3.1-70b --weight-type fp8 --gpu h100-sxm --gpus 2 -c 32768 -np 16\n"
      "  llmctl kvplan --model llama-3.1-8b --gpu h100-sxm --engine vllm --gpu-util 0.95 --explain\n"
      "  llmctl kvplan --model model.gguf --gpu rtx-4090 --engine llamacpp -c 8192 --json\n"
      "  llmctl kvplan -m qwen3-8b --engine vllm --max-model-len 16384 --gpu-memory-utilization 0.95 \\\n"
      "    --kv-cache-dtype fp8 --max-num-seqs 256   # vLLM's own option names\n"
      "  llmctl kvplan --model path/to/config.json --gpu-mem 40 --bandwidth 1500 --tflops 300 --svg mem.svg\n"
      "\nMemory is per GPU; GiB = 2^30 bytes. --model takes a catalog name (--list-models), a .gguf file\n"
      "(metadata only) or a Hugging Face config.json. Speeds are roofline upper bounds.\n"
      "vLLM's option names are accepted beside ours (--max-model-len, --gpu-memory-utilization,\n"
      "--tensor-parallel-size/-tp, --kv-cache-dtype, --max-num-seqs, --max-num-batched-tokens), and\n"
      "llama.cpp's (-c, -np, -ctk/-ctv). --batch is the old name of --parallel.\n"
      "Exit codes: 0 ok (also when the plan does not fit; see \"fits\"), 1 error, 2 usage error,\n130 stopped by Ctrl-C.");
  sub->add_option("-m,--model", opt.model, "Catalog name, .gguf file or Hugging Face config.json")
      ->type_name("MODEL");
  sub->add_option("--gpu", opt.gpu, "GPU from the catalog (--list-gpus); default h100-sxm")
      ->type_name("NAME");
  sub->add_option("--gpu-mem", opt.gpu_mem, "Custom GPU: usable memory in GiB (as cudaMemGetInfo reports)")
      ->check(positive_number());
  sub->add_option("--bandwidth", opt.bandwidth, "Custom GPU: memory bandwidth in GB/s")->check(positive_number());
  sub->add_option("--tflops", opt.tflops, "Custom GPU: dense 16-bit tensor TFLOPS")->check(positive_number());
  sub->add_option("--gpus", opt.gpus, "Number of GPUs (default 1)")->check(at_least(int64_t{1}));
  sub->add_option("--tp,--tensor-parallel-size", opt.tp, "Tensor-parallel size (default: --gpus); the rest are replicas")
      ->check(at_least(int64_t{1}));
  sub->add_option("--weight-type", opt.weight_type,
                  "f32 f16 bf16 fp8 int8 q8_0 q4_0 q4_k int4|gptq|awq (int4-gN) gguf (default bf16; gguf for a .gguf)")
      ->type_name("TYPE");
  sub->add_option("--group-size", opt.group_size, "Group size of int4/GPTQ/AWQ weights (default 128)")
      ->check(at_least(int64_t{1}));
  const std::vector<std::string> kv_types = {"f32", "f16", "bf16", "fp8", "fp8_e4m3", "fp8_e5m2", "q8_0", "q4_0"};
  std::vector<std::string> kv_or_auto = kv_types;
  kv_or_auto.push_back("auto");
  sub->add_option("--kv-type,--kv-cache-dtype", opt.kv_type,
                  "KV cache type of K and V (default f16; auto, as vLLM: the model's 16-bit type)")
      ->check(one_of(kv_or_auto))
      ->each([](const std::string&) { opt.kv_type_given = true; });
  sub->add_option("--cache-type-k", opt.cache_type_k, "llama.cpp's -ctk: K cache type (V keeps --kv-type's)")
      ->check(one_of(kv_types));
  sub->add_option("--cache-type-v", opt.cache_type_v, "llama.cpp's -ctv: V cache type (K keeps --kv-type's)")->check(one_of(kv_types));
  sub->add_option("-c,--ctx,--ctx-size,--max-model-len", opt.ctx,
                  "Context per sequence in tokens, up to 2^31 (default min(model max, 8192))")
      ->check(in_range(int64_t{1}, int64_t{1} << 31));
  sub->add_option("--parallel", opt.parallel,
                  "Concurrent sequences (llama.cpp's -np; vLLM: the requests running at once), up to 2^20 (default 1)")
      ->check(in_range(int64_t{1}, int64_t{1} << 20));
  sub->add_option("--batch", opt.batch, "Deprecated: the old name of --parallel (in run, --batch is a JSONL file)")
      ->check(in_range(int64_t{1}, int64_t{1} << 20))
      ->group("");
  sub->add_option("--block-size", opt.block_size, "KV block size in tokens (default 16)")->check(at_least(int64_t{1}));
  sub->add_option("--gpu-util,--gpu-memory-utilization", opt.gpu_util,
                  "Fraction of GPU memory the engine may take, in (0, 1] (default 0.9)")
      ->check(number_in(0.0, 1.0, true));
  sub->add_option("--engine", opt.engine, "Budget rule: llmctl, vllm, llamacpp (default llmctl)")
      ->type_name("NAME");
  sub->add_option("--kv-budget", opt.kv_budget, "GiB per GPU left for the KV cache, when already known");
  sub->add_option("--activation", opt.activation, "GiB per GPU of peak activation (overrides the estimate)");
  sub->add_option("--non-torch", opt.non_torch, "GiB per GPU of non-torch memory / CUDA context (overrides the default)");
  sub->add_option("--max-batched-tokens,--max-num-batched-tokens", opt.max_batched_tokens,
                  "vLLM's max_num_batched_tokens: tokens of its profile run (default 8192)")
      ->check(at_least(int64_t{1}));
  sub->add_option("--max-num-seqs", opt.max_num_seqs,
                  "vLLM's max_num_seqs: the most sequences it schedules, whose sampler buffers it reserves "
                  "(default 1024; --parallel is how many run in the plan)")
      ->check(at_least(int64_t{1}));
  sub->add_flag("--json", opt.json, "JSON output");
  sub->add_option("--svg", opt.svg, "Write a chart of memory per GPU against context to FILE")
      ->type_name("FILE");
  sub->add_flag("--explain", opt.explain, "Show the formulas with their numbers, and common published errors");
  sub->add_flag("--no-sweep", opt.no_sweep, "Leave out the sweep over contexts and batches");
  sub->add_flag("--measure", opt.measure, "Allocate the planned weights and KV cache (CPU) and print measured vs predicted");
  sub->add_flag("--list-models", opt.list_models, "List the model catalog");
  sub->add_flag("--list-gpus", opt.list_gpus, "List the GPU catalog");
  sub->callback([&action] {
    if (opt.batch) {
      fmt::print(stderr,
                 "llmctl: note: kvplan --batch is deprecated; it is now --parallel {} (llama.cpp's -np), "
                 "so that --batch means one thing (a JSONL file in run)\n",
                 *opt.batch);
      opt.parallel = *opt.batch;
    }
    action = [] { return run_kvplan(opt); };
  });
}

}  // namespace llmctl::cli
