// `llmctl bench` output (bench_report.h): the Markdown table, --json, --csv, the summary line.
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <set>

#include "cli/bench_report.h"

namespace llmctl::cli {

namespace {

constexpr const char* kByteUnits[4] = {"B", "KiB", "MiB", "GiB"};
constexpr const char* kCountUnits[4] = {"", "K", "M", "B"};

std::string human_count(double x, const char* const units[4], double step) {
  int u = 0;
  while (u < 3 && x >= step) {
    x /= step;
    ++u;
  }
  return fmt::format("{:.2f} {}", x, units[u]);
}

// null where a row has no such figure: 0 would read as a rate
nlohmann::json or_null(double x) { return x > 0 ? nlohmann::json(x) : nlohmann::json(); }
nlohmann::json or_null(const std::string& s) {
  return s.empty() ? nlohmann::json() : nlohmann::json(s);
}

void print_json(const BenchOptions& opt, const std::vector<BenchRow>& rows,
                const BenchProbes& probes) {
  nlohmann::json j = nlohmann::json::array();
  for (const BenchRow& r : rows)
    j.push_back({{"model", r.model},
                 {"type", r.type},
                 {"bytes", r.bytes},
                 {"params", r.params},
                 {"threads", r.threads},
                 {"test", r.test},
                 {"tok_s", r.tok_s},
                 {"sd", r.sd},
                 {"gb_s", r.gb_s},
                 {"bw_pct", r.bw_pct},
                 {"gflop_s", r.gflop_s},
                 {"peak_kind", or_null(r.peak_kind)},
                 {"peak_pct", or_null(r.peak_pct)},
                 {"matmul_isa", r.matmul_isa},
                 {"matmul_kernels", r.matmul_kernels}});
  nlohmann::json peaks = nlohmann::json::array();
  for (const BenchPeak& p : probes.peaks)
    peaks.push_back({{"threads", p.threads},
                     {"gflop_s_f32", p.gflop_s_f32},
                     {"gop_s_int8", p.gop_s_int8},
                     {"isa", p.isa}});
  // the top-level peaks: at the most threads, as the bandwidth probe
  const BenchPeak* top = probes.peaks.empty() ? nullptr : &probes.peaks.back();
  fmt::print("{}\n", nlohmann::json{{"probe_gb_s", probes.gb_s},
                                    {"probe", probes.kind},
                                    {"peak_gflop_s_f32", or_null(top ? top->gflop_s_f32 : 0)},
                                    {"peak_gop_s_int8", or_null(top ? top->gop_s_int8 : 0)},
                                    {"peak_probes", peaks},
                                    {"gemm_gflop_s", or_null(probes.gemm_gflop_s)},
                                    {"cache_bytes", or_null(probes.cache_bytes)},
                                    {"batch_invariant", opt.batch_invariant},
                                    {"cuda_graphs", opt.cuda_graphs},
                                    {"rows", j}}
                         .dump(2));
}

}  // namespace

const BenchPeak* BenchProbes::peak_at(int threads) const {
  for (const BenchPeak& p : peaks)
    if (p.threads == threads) return &p;
  return nullptr;
}

double BenchProbes::peak_rate(const std::string& peak_kind, int threads) const {
  const BenchPeak* p = peak_at(threads);
  if (p == nullptr) return 0;
  return peak_kind == "int8" ? p->gop_s_int8 : peak_kind == "f32" ? p->gflop_s_f32 : 0;
}

std::string bench_bytes(double bytes) { return human_count(bytes, kByteUnits, 1024.0); }

void print_bench_rows(const BenchOptions& opt, const std::vector<BenchRow>& rows,
                      const BenchProbes& probes) {
  const double probe_gb_s = probes.gb_s;
  if (opt.json) {
    print_json(opt, rows, probes);
    return;
  }
  if (opt.csv) {
    fmt::print("model,type,bytes,params,threads,test,tok_s,sd,gb_s,bw_pct,gflop_s,peak_pct\n");
    for (const BenchRow& r : rows)
      fmt::print("{},{},{},{},{},{},{:.3f},{:.3f},{:.3f},{:.1f},{:.3f},{}\n", r.model, r.type,
                 r.bytes, r.params, r.threads, r.test, r.tok_s, r.sd, r.gb_s, r.bw_pct, r.gflop_s,
                 r.peak_pct > 0 ? fmt::format("{:.1f}", r.peak_pct) : "");
    return;
  }
  fmt::print(
      "| model | type | size | params | threads | test | t/s | GB/s | % of probe | GFLOP/s | "
      "% of peak |\n");
  fmt::print("|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|\n");
  for (const BenchRow& r : rows)
    fmt::print("| {} | {} | {} | {} | {} | {} | {:.2f} ± {:.2f} | {} | {} | {} | {} |\n", r.model,
               r.type, bench_bytes(static_cast<double>(r.bytes)),
               human_count(static_cast<double>(r.params), kCountUnits, 1000.0), r.threads, r.test,
               r.tok_s, r.sd, r.gb_s > 0 ? fmt::format("{:.1f}", r.gb_s) : "",
               r.bw_pct > 0 ? fmt::format("{:.0f}%{}", r.bw_pct, r.bw_pct > 100 ? "*" : "") : "",
               r.gflop_s > 0 ? fmt::format("{:.1f}", r.gflop_s) : "",
               r.peak_pct > 0 ? fmt::format("{:.0f}% {}", r.peak_pct, r.peak_kind) : "");
  std::set<std::string> kernel_lines;
  for (const BenchRow& r : rows)
    if (!r.matmul_isa.empty())
      kernel_lines.insert(fmt::format("CPU matmul isa {}: {}", r.matmul_isa, r.matmul_kernels));
  if (!kernel_lines.empty()) fmt::print("\n");
  for (const std::string& l : kernel_lines) fmt::print("{}\n", l);
  if (probe_gb_s > 0)
    fmt::print("\n{} bandwidth (probe): {:.1f} GB/s\n",
               std::string(probes.kind) == "gpu-copy" ? "GPU copy" : "memory read", probe_gb_s);
  for (const BenchPeak& p : probes.peaks)
    fmt::print("compute peak (probe, {}, {} threads): f32 FMA {:.1f} GFLOP/s, int8 {:.1f} GOP/s\n",
               p.isa, p.threads, p.gflop_s_f32, p.gop_s_int8);
  if (probes.gemm_gflop_s > 0)
    fmt::print("cuBLAS f16 GEMM rate (probe): {:.0f} GFLOP/s\n", probes.gemm_gflop_s);
  fmt::print("{}", bench_footnotes(opt, rows, probes));
}

std::string bench_footnotes(const BenchOptions& opt, const std::vector<BenchRow>& rows,
                            const BenchProbes& probes) {
  // Above 100 %: either what a step reads is small enough to stay in the caches, which are
  // faster than the memory the probe's large buffer measures, or the memory itself ran faster
  // during the test than during the probe (a step larger than the caches: 574 MiB of a 1B Q4_0
  // file was once said to stay in a 32 MiB L3 because it was smaller than the probe's 1 GiB).
  const double probe_bytes = static_cast<double>(opt.probe_mib) * 1024 * 1024;
  const char* device = std::string(probes.kind) == "gpu-copy" ? "GPU" : "CPU";
  const bool cache_known = probes.cache_bytes > 0;
  std::string cached, unsure, drifted;
  for (const BenchRow& r : rows) {
    if (r.bw_pct <= 100) continue;
    if (cache_known && r.step_bytes <= probes.cache_bytes) {
      if (cached.empty())
        cached = fmt::format(
            "* above 100% of the probe: a decode step reads only {}, which stays in the {}'s {} "
            "cache; the probe reads {} from memory, so this rate is cache bandwidth, not "
            "memory's\n",
            bench_bytes(r.step_bytes), device, bench_bytes(probes.cache_bytes),
            bench_bytes(probe_bytes));
    } else if (!cache_known && r.step_bytes < probe_bytes) {
      if (unsure.empty())
        unsure = fmt::format(
            "* above 100% of the probe: a decode step reads {}, less than the probe's {}: it may "
            "stay in the {}'s caches (their size is unknown), or the memory bandwidth changed "
            "between the probe and the test (a shared or busy host)\n",
            bench_bytes(r.step_bytes), bench_bytes(probe_bytes), device);
    } else if (drifted.empty()) {
      drifted = fmt::format(
          "* above 100% of the probe: a decode step reads {} from memory, {}, so the {}'s memory "
          "bandwidth changed between the probe and the test (a shared or busy host); compare "
          "rows of one run, or rerun on an idle machine\n",
          bench_bytes(r.step_bytes),
          cache_known
              ? fmt::format("more than the {}'s {} cache", device, bench_bytes(probes.cache_bytes))
              : fmt::format("no less than the probe's {}", bench_bytes(probe_bytes)),
          device);
    }
  }
  return cached + unsure + drifted;
}

void print_bench_summary(size_t n_rows, const BenchProbes& probes) {
  // Rates only where measured: 0 would read as a rate.
  const BenchPeak* top = probes.peaks.empty() ? nullptr : &probes.peaks.back();
  fmt::print(
      stderr, "llmctl-bench: rows={} probe_gb_s={:.1f} probe={}{}{}\n", n_rows, probes.gb_s,
      probes.kind,
      top != nullptr ? fmt::format(" peak_gflop_s_f32={:.1f} peak_gop_s_int8={:.1f}",
                                   top->gflop_s_f32, top->gop_s_int8)
                     : "",
      probes.gemm_gflop_s > 0 ? fmt::format(" gemm_gflop_s={:.0f}", probes.gemm_gflop_s) : "");
}

}  // namespace llmctl::cli
