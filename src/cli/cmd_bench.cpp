// llmctl bench: prefill (ppN) and decode (tgN) speed of the engine that serves `run`, as
// llama-bench measures them, with decode put against the machine's measured read bandwidth and,
// on the CPU, prefill against its measured arithmetic peak.
//
// For each model and thread count: every weight's first-matmul work (repacks:
// Forward::prepare_matmuls; llama.cpp does its own at load) and one warm-up, then -r
// repetitions of
//   ppN  a fresh sequence, N prompt tokens in one forward pass (-b chunks), logits of the last
//   tgN  a fresh sequence, N tokens fed one per step, logits every step (as generation does)
// Tokens are fixed pseudo-random ids (the speed does not depend on them).
// Reported: tokens/s mean and sample sd over the repetitions; for tg the bytes one step reads
// (weights per token, weight_stats(), plus the K/V rows of the positions attended to, on
// average) times tokens/s, and that as a percentage of the probe's bandwidth; for pp GFLOP/s
// (2 flops per matrix element per token plus attention's 4 * head_dim per (head, query, key)),
// on the CPU also as a percentage of the compute peak its matmul kernels run at (issue 19's
// prefill target): the f32 FMA peak for a main type multiplied in f32 (F32, F16, BF16), the
// int8 dot-product peak for one multiplied with int8 activations (Q8_0, Q4_0, K-quants ...;
// matmul_fast_int8_activations()), at the row's thread count.
// The probes (--probe-mib 0 skips them all): on the CPU a multi-threaded read of a large buffer
// and, per thread count, the f32 FMA and int8 dot-product peaks in the matmul kernels'
// instruction set (compute_probe.h; about 0.25 s each); for a GPU (--device cuda[:N], or
// auto when a GPU is visible) the device's copy bandwidth (cudaMemcpy device to device,
// 2 * bytes / time), the yardstick of issue 4's decode targets; with --batch-invariant off also
// cuBLAS's f16 GEMM rate (the prefill target's yardstick).
// On the CPU the matmul kernels that ran (per weight dtype of the model's matrices, e.g.
// "q4_1 avx512-vnni", "q4_k avx512-vnni repacked-x8"; LLMCTL_MATMUL_REPACK=off keeps the
// GGUF layout) and their instruction set (LLMCTL_MATMUL_ISA forces one) are reported
// too: stderr, below the Markdown table, and in the JSON rows (matmul_isa, matmul_kernels).
// Output (bench_report.h): a Markdown table (default), --json or --csv on stdout; progress on
// stderr; stderr ends with one summary line: llmctl-bench: rows=N probe_gb_s=F
// probe=cpu-read|gpu-copy [peak_gflop_s_f32=F peak_gop_s_int8=F, when the compute probe ran: at
// the most threads] [gemm_gflop_s=F, when the cuBLAS probe ran]
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>

#include "backend/cpu/bandwidth_probe.h"
#include "backend/cpu/compute_probe.h"
#include "backend/cpu/matmul_fast.h"
#include "backend/cpu/weight_repack.h"
#include "backend/gpu_utilities.h"
#include "backend/selection.h"
#include "cli/app.h"
#include "cli/bench_report.h"
#include "cli/cli_style.h"
#include "cli/engine_options.h"
#include "cli/interrupt.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/stop_point.h"
#include "model/arch.h"
#include "model/forward.h"
#include "model/model_loader.h"

namespace llmctl::cli {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::vector<int32_t> token_ids(int64_t n, int32_t n_vocab) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  uint64_t x = 12345;
  for (int32_t& t : v) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    t = static_cast<int32_t>((x >> 33) % static_cast<uint64_t>(n_vocab));
  }
  return v;
}

// Seconds for one ppN (n_gen == 0) or tgN run on a fresh sequence, after `depth` context
// positions filled untimed (prefill chunks of -b). Each wanted row asks for its top-1
// candidate, as greedy `run` does: a model that samples on the device (CUDA) then downloads
// one (id, logit) pair per token instead of the whole row; the CPU reads the row.
double time_one(Forward& fwd, const std::vector<int32_t>& ids, bool decode_steps,
                const std::vector<int32_t>& depth = {}) {
  stop_point();  // Ctrl-C between runs (core/stop_point.h)
  const auto n = static_cast<int64_t>(ids.size());
  const auto d = static_cast<int64_t>(depth.size());
  const int32_t seq = fwd.add_sequence(d + n + 1);
  if (fwd.reserve(seq, d + n) != Reserve::Ok) throw Error("bench: the KV pool is too small");
  if (d > 0) {
    std::vector<BatchToken> fill;
    for (int64_t i = 0; i < d; ++i)
      fill.push_back(BatchToken{seq, depth[static_cast<size_t>(i)], i + 1 == d, 1});
    fwd.decode(fill);
  }
  const Clock::time_point t0 = Clock::now();
  if (decode_steps) {
    for (const int32_t t : ids) {
      stop_point();  // and between decode steps (an atomic load: nothing against the timing)
      fwd.decode({BatchToken{seq, t, true, 1}});
    }
  } else {
    std::vector<BatchToken> batch;
    for (int64_t i = 0; i < n; ++i)
      batch.push_back(BatchToken{seq, ids[static_cast<size_t>(i)], i + 1 == n, 1});
    fwd.decode(batch);
  }
  const double s = seconds_since(t0);
  fwd.remove_sequence(seq);
  return s;
}

// The CPU fast path's matmul kernel for each dtype of the model's matrices, "a, b" (the
// repacked kernel's name where the fast backend repacks that dtype: weight_repack.h).
std::string cpu_matmul_kernels(const ModelWeights& w) {
  std::set<GgmlType> types;
  if (w.output.present()) types.insert(w.output.type);
  for (const LayerWeights& l : w.layers)
    for (const LayerTensor& t : kLayerTensors)
      if (t.kind == TensorKind::Matrix && (l.*t.member).present()) types.insert((l.*t.member).type);
  std::string s;
  for (GgmlType type : types)
    s += (s.empty() ? "" : ", ") +
         std::string(cpu::matmul_fast_kernel_name(
             type, cpu::MatmulIsa::Auto, cpu::MatmulPrecision::Fast, cpu::repack_active(type)));
  return s;
}

std::pair<double, double> mean_sd(const std::vector<double>& v) {
  const double mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  double ss = 0;
  for (double x : v) ss += (x - mean) * (x - mean);
  return {mean, v.size() > 1 ? std::sqrt(ss / static_cast<double>(v.size() - 1)) : 0.0};
}

void bench_model(const BenchOptions& opt, const std::string& path, int threads,
                 const BenchProbes& probes, std::vector<BenchRow>& rows) {
  const LoadedModel m = load_model(path);
  const ModelConfig& c = m.config;
  const WeightStats ws = weight_stats(m.weights);
  const std::unique_ptr<Backend> backend = make_backend(backend_choice(opt, threads));
  ForwardOptions fo;
  fo.max_batch_tokens =
      std::max<int64_t>(1, std::min(opt.batch_size, std::max({opt.n_prompt, opt.n_depth, int64_t{1}})));
  apply_kv_types(opt, fo.kv);
  fo.kv.n_blocks = (opt.n_depth + std::max(opt.n_prompt, opt.n_gen) + 1 + fo.kv.block_size - 1) /
                   fo.kv.block_size;
  fo.kv.max_sequences = 1;
  Forward fwd(c, m.weights, *backend, fo);
  const auto n_vocab = static_cast<int32_t>(c.n_vocab);

  BenchRow base;
  base.model = path;
  base.type = ggml_type_name(ws.main_type);
  base.bytes = ws.bytes;
  base.params = ws.params;
  base.threads = backend->n_threads();
  if (std::string(backend->name()) == "cpu") {
    base.matmul_isa = cpu::matmul_isa_name(cpu::matmul_fast_auto_isa());
    base.matmul_kernels = cpu_matmul_kernels(m.weights);
  }
  fmt::print(stderr, "llmctl: bench {} ({}, {}) threads {}{}\n", path, base.type,
             bench_bytes(static_cast<double>(ws.bytes)), base.threads,
             base.matmul_isa.empty() ? ""
                                     : fmt::format(", matmul isa {} ({})", base.matmul_isa,
                                                   base.matmul_kernels));
  // The weights' first-matmul work now (repacks; llama.cpp does its own at load): a
  // mixture-of-experts warm-up meets only some experts, so the timed runs would pay the rest.
  const auto t_prepare = std::chrono::steady_clock::now();
  fwd.prepare_matmuls();
  fmt::print(stderr, "llmctl: bench: weights prepared for the kernels in {:.2f} s\n",
             std::chrono::duration<double>(std::chrono::steady_clock::now() - t_prepare).count());
  time_one(fwd, token_ids(std::min<int64_t>(std::max<int64_t>(opt.n_prompt, 1), 32), n_vocab),
           false);
  time_one(fwd, token_ids(4, n_vocab), true);  // warm-up
  // One test: -r timed runs of n tokens, as a row with t/s mean and sd.
  const auto measure = [&](const char* name, int64_t n, bool decode_steps) {
    std::vector<double> rates;
    const std::vector<int32_t> ids = token_ids(n, n_vocab);
    const std::vector<int32_t> depth = token_ids(opt.n_depth, n_vocab);
    for (int r = 0; r < opt.reps; ++r)
      rates.push_back(static_cast<double>(n) / time_one(fwd, ids, decode_steps, depth));
    BenchRow row = base;
    row.test = opt.n_depth > 0 ? fmt::format("{}{} @ d{}", name, n, opt.n_depth)
                               : fmt::format("{}{}", name, n);
    std::tie(row.tok_s, row.sd) = mean_sd(rates);
    return row;
  };
  if (opt.n_prompt > 0) {
    BenchRow row = measure("pp", opt.n_prompt, false);
    const double p = static_cast<double>(opt.n_prompt), dp = static_cast<double>(opt.n_depth);
    // query i (0-based) of the test attends to depth + i + 1 keys
    const double attn =
        4.0 * static_cast<double>(c.n_layers * c.n_heads * c.head_dim) * (p * dp + p * (p + 1) / 2);
    const double flops = 2.0 * static_cast<double>(ws.matmul_params) * p + attn +
                         2.0 * static_cast<double>(ws.output_params);
    row.gflop_s = flops / (p / row.tok_s) / 1e9;
    if (!base.matmul_isa.empty()) {
      row.peak_kind = cpu::matmul_fast_int8_activations(ws.main_type) ? "int8" : "f32";
      const double peak = probes.peak_rate(row.peak_kind, row.threads);
      row.peak_pct = peak > 0 ? 100.0 * row.gflop_s / peak : 0.0;
    }
    rows.push_back(row);
  }
  if (opt.n_gen > 0) {
    BenchRow row = measure("tg", opt.n_gen, true);
    // K and V rows of every layer, over the mean number of positions a step reads
    const double kv_row = static_cast<double>(kv_row_bytes(fo.kv.type, c.kv_dim()) +
                                              kv_row_bytes(kv_v_type(fo.kv), c.kv_dim()));
    const double kv_bytes =
        static_cast<double>(c.n_layers) * kv_row *
        (static_cast<double>(opt.n_depth) + static_cast<double>(opt.n_gen + 1) / 2.0);
    row.step_bytes = static_cast<double>(ws.bytes_per_token) + kv_bytes;
    row.gb_s = row.step_bytes * row.tok_s / 1e9;
    row.bw_pct = probes.gb_s > 0 ? 100.0 * row.gb_s / probes.gb_s : 0.0;
    rows.push_back(row);
  }
}

int run_bench(const BenchOptions& opt) {
  for (const std::string& m : opt.models) require_model_path(m);
  // Ctrl-C: the run in progress stops, the rows already measured are printed, exit 130.
  install_interrupt_handler();
  const std::vector<int> threads = opt.thread_list.empty() ? std::vector<int>{0} : opt.thread_list;
  // The GPU the backend will run on, or -1 for the CPU (auto: GPU 0 when one is visible).
  int gpu = -1;
  if (opt.device == "auto")
    gpu = probe_gpus().gpus.empty() ? -1 : 0;
  else if (opt.device != "cpu")
    gpu = cuda_device_index(opt.device);
  BenchProbes probes;
  probes.kind = gpu >= 0 ? "gpu-copy" : "cpu-read";
  if (gpu < 0) probes.cache_bytes = static_cast<double>(cpu_largest_cache_bytes());
  if (opt.probe_mib > 0 && gpu >= 0) {
    probes.gb_s = measure_gpu_copy_bandwidth(gpu, static_cast<size_t>(opt.probe_mib) << 20, 10);
    fmt::print(stderr,
               "llmctl: GPU {} copy bandwidth probe: {:.1f} GB/s ({} MiB device to device)\n", gpu,
               probes.gb_s, opt.probe_mib);
    if (!opt.batch_invariant) {
      probes.gemm_gflop_s = measure_gpu_gemm_rate(gpu, 8192, 5);
      fmt::print(stderr, "llmctl: GPU {} cuBLAS GEMM probe: {:.0f} GFLOP/s (f16 8192^3)\n", gpu,
                 probes.gemm_gflop_s);
    }
  } else if (opt.probe_mib > 0) {
    std::set<int> counts;  // the thread counts the rows run with (0: every core)
    for (const int t : threads) counts.insert(t > 0 ? t : default_cpu_threads());
    const int n = *counts.rbegin();
    const cpu::BandwidthResult bw =
        cpu::measure_read_bandwidth(static_cast<uint64_t>(opt.probe_mib) << 20, n, 5);
    probes.gb_s = bw.gb_per_s;
    fmt::print(stderr, "llmctl: bandwidth probe: {:.1f} GB/s ({} MiB, {} threads, {})\n",
               bw.gb_per_s, opt.probe_mib, bw.n_threads, bw.isa);
    // Compute peaks scale with the threads, so each thread count gets its own (about 0.25 s).
    for (const int t : counts) {
      const cpu::ComputeResult c = cpu::measure_compute_peak(t, 5);
      probes.peaks.push_back(BenchPeak{t, c.gflop_s_f32_fma, c.gop_s_int8, c.isa});
      fmt::print(stderr,
                 "llmctl: compute peak probe: f32 FMA {:.1f} GFLOP/s, int8 {:.1f} GOP/s ({} "
                 "threads, {})\n",
                 c.gflop_s_f32_fma, c.gop_s_int8, t, c.isa);
    }
  }
  std::vector<BenchRow> rows;
  bool stopped = false;
  try {
    for (const std::string& m : opt.models)
      for (int t : threads) bench_model(opt, m, t, probes, rows);
  } catch (const Stopped&) {
    // Ctrl-C (or a closed stdout): the rows measured so far are complete, so they are printed.
    if (output_closed()) throw;
    stopped = true;
  }
  if (!stopped || !rows.empty()) print_bench_rows(opt, rows, probes);
  if (stopped) {
    fmt::print(stderr, "llmctl: interrupted; {} rows measured\n", rows.size());
    return kExitInterrupted;
  }
  print_bench_summary(rows.size(), probes);
  return kExitOk;
}

}  // namespace

void add_bench_command(CLI::App& app, Action& action) {
  static BenchOptions opt;
  CLI::App* sub = app.add_subcommand(
      "bench",
      "Prefill and decode speed, decode against the machine's memory bandwidth, prefill "
      "against its compute peak");
  sub->footer(
      "Examples:\n"
      "  llmctl bench -m model-q4_0.gguf,model-q8_0.gguf -t 1,2\n"
      "  llmctl bench -m model.gguf -p 512 -n 128 -r 5 --json\n"
      "ppN: N prompt tokens in one forward pass; tgN: N tokens decoded one at a time from an\n"
      "empty context (with -d D: after D positions, 'pp512 @ d4096'). t/s is mean ± sd over -r\n"
      "repetitions after a warm-up (and after every weight is repacked for its kernels, as\n"
      "llama.cpp does at load). GB/s = bytes one decode step reads (weights + K/V) x t/s;\n"
      "'% of probe' divides by the bandwidth probe (CPU: memory read; GPU: device copy\n"
      "bandwidth). '% of peak' (CPU prefill) divides GFLOP/s by the compute peak the matmul\n"
      "kernels run at, measured with as many threads: f32 FMA for F32/F16/BF16 weights, int8\n"
      "dot products (AVX-512 VNNI, AVX2 maddubs) for quantized ones. --probe-mib 0 skips the\n"
      "probes. Benchmark on an idle machine; compare ratios from one run.\n"
      "Exit codes: 0 ok, 1 error, 2 usage error, 130 stopped by Ctrl-C.");
  add_engine_options(sub, opt,
                     {kModelList | kThreadList | kDevice | kKvType | kBatchSize | kBatchInvariant |
                      kCudaGraphs});
  sub->get_option("--batch-size")->description("Tokens per forward pass in the prefill test");
  sub->add_option("-p,--n-prompt", opt.n_prompt, "Prompt tokens of the prefill test (0: skip)")
      ->capture_default_str()
      ->check(in_range(int64_t{0}, int64_t{65536}));
  sub->add_option("-n,--n-gen", opt.n_gen, "Tokens of the decode test (0: skip)")
      ->capture_default_str()
      ->check(in_range(int64_t{0}, int64_t{65536}));
  sub->add_option("-d,--n-depth", opt.n_depth,
                  "Context positions filled (untimed) before each test, as llama-bench's -d: "
                  "pp512 @ d4096 is 512 prompt tokens after 4096")
      ->capture_default_str()
      ->check(in_range(int64_t{0}, int64_t{1} << 20));
  sub->add_option("-r,--repetitions", opt.reps, "Repetitions")
      ->capture_default_str()
      ->check(in_range(1, 1000));
  sub->add_option("--probe-mib", opt.probe_mib,
                  "Buffer of the bandwidth probe in MiB (0: no probes, neither bandwidth nor "
                  "compute peak)")
      ->capture_default_str()
      ->check(in_range(int64_t{0}, int64_t{65536}));
  sub->add_flag("--json", opt.json, "JSON instead of a Markdown table");
  sub->add_flag("--csv", opt.csv, "CSV instead of a Markdown table");
  sub->callback([&action] {
    action = [] {
      check_engine_options(opt);
      return run_bench(opt);
    };
  });
}

}  // namespace llmctl::cli
