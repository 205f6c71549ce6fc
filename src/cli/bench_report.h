#pragma once
// `llmctl bench` (cmd_bench.cpp): its options, the rows it measures, the probes it puts them
// against, and their output (cmd_bench_report.cpp): the Markdown table, --json, --csv.

#include <cstdint>
#include <string>
#include <vector>

#include "cli/engine_options.h"

namespace llmctl::cli {

// The engine's -m (several), -t (a list), --device, --kv-type, -b, --batch-invariant,
// --cuda-graphs (engine_options.h) and bench's own.
struct BenchOptions : EngineOptions {
  int64_t n_prompt = 512;
  int64_t n_gen = 128;
  int64_t n_depth = 0;  // -d: positions filled before each test (llama-bench's -d)
  int reps = 3;
  int64_t probe_mib = 1024;  // 0: no probes (bandwidth and compute peak)
  bool json = false;
  bool csv = false;
};

struct BenchRow {
  std::string model, type, test;
  std::string matmul_isa, matmul_kernels;  // CPU only: "avx512", "q4_1 avx512-vnni, ..."
  uint64_t bytes = 0, params = 0;
  int threads = 0;
  double tok_s = 0, sd = 0, gb_s = 0, bw_pct = 0, gflop_s = 0;
  double step_bytes = 0;  // tg: bytes one decode step reads (weights + K/V)
  // pp on the CPU: the peak the matmul kernels of the main type run at, "f32" (FMA) or "int8"
  // (dot products; matmul_fast_int8_activations()), and gflop_s as a percentage of it at the
  // row's thread count (0: the compute probe did not run).
  std::string peak_kind;
  double peak_pct = 0;
};

// The CPU compute-peak probe at one thread count (backend/cpu/compute_probe.h).
struct BenchPeak {
  int threads = 0;
  double gflop_s_f32 = 0, gop_s_int8 = 0;
  std::string isa;
};

// What the rates are put against: the bandwidth probe (decode), the compute-peak probe per
// thread count (CPU prefill) and, for a GPU in the cuBLAS mode, cuBLAS's GEMM rate (prefill).
struct BenchProbes {
  double gb_s = 0;
  const char* kind = "cpu-read";  // or "gpu-copy"
  double gemm_gflop_s = 0;        // 0: not measured
  std::vector<BenchPeak> peaks;   // ascending threads; empty: not measured
  double cache_bytes = 0;         // the device's largest cache (CPU: its last level); 0: unknown
  // The peak measured at `threads`, or nullptr.
  const BenchPeak* peak_at(int threads) const;
  // The peak of `peak_kind` ("f32", "int8") at `threads`; 0 when not measured.
  double peak_rate(const std::string& peak_kind, int threads) const;
};

// "135.00 M" style sizes of the table: bytes in binary units ("98.35 MiB").
std::string bench_bytes(double bytes);

void print_bench_rows(const BenchOptions& opt, const std::vector<BenchRow>& rows,
                      const BenchProbes& probes);
// The table's notes on decode rows above 100 % of the bandwidth probe ("" when none is): a
// step that fits the device's largest cache runs from the caches; a larger one means the host's
// bandwidth moved between the probe and the test. With the cache size unknown, a step smaller
// than the probe's buffer may be either.
std::string bench_footnotes(const BenchOptions& opt, const std::vector<BenchRow>& rows,
                            const BenchProbes& probes);
// The last line on stderr: llmctl-bench: rows=N probe_gb_s=F probe=cpu-read|gpu-copy
// [peak_gflop_s_f32=F peak_gop_s_int8=F, at the most threads, when the compute probe ran]
// [gemm_gflop_s=F, when the cuBLAS probe ran]
void print_bench_summary(size_t n_rows, const BenchProbes& probes);

}  // namespace llmctl::cli
