// Wording and figures that must not mislead (issue 20, point 10): bench's size line and
// probe percentages, svd-embed's float64 Gram note, kvplan's counts and levers, quantize's
// repeated warnings.
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>

#include "cli/bench_report.h"
#include "core/cpu_features.h"
#include "support/run_cli.h"
#include "support/test_data.h"

using llmctl::test::require_test_file;
using llmctl::test::run_llmctl;

namespace {

std::string stories() { return require_test_file("models/stories260K.gguf"); }

size_t count_lines_with(const std::string& text, const std::string& what) {
  std::istringstream in(text);
  size_t n = 0;
  for (std::string line; std::getline(in, line);) if (line.find(what) != std::string::npos) ++n;
  return n;
}

}  // namespace

TEST_CASE("bench: the stderr size line agrees with the table, no unmeasured gemm rate", "[cli]") {
  const std::string m = stories();
  const auto r = run_llmctl({"bench", "-m", m, "-p", "8", "-n", "16", "-r", "1", "--device", "cpu"});
  REQUIRE(r.code == 0);
  std::smatch size;
  REQUIRE(std::regex_search(r.err, size, std::regex("bench .* \\(F32, ([0-9.]+ [KMG]?i?B)\\)")));
  CHECK(r.out.find("| F32 | " + size[1].str() + " |") != std::string::npos);
  CHECK(r.err.find("gemm_gflop_s") == std::string::npos);  // measured only for cuBLAS on a GPU
  const auto j = run_llmctl({"bench", "-m", m, "-p", "8", "-n", "0", "-r", "1", "--probe-mib", "0",
                             "--device", "cpu", "--json"});
  REQUIRE(j.code == 0);
  CHECK(nlohmann::json::parse(j.out)["gemm_gflop_s"].is_null());

  // Above 100 % of the probe (a model this small stays in the caches) the table says why.
  std::smatch pct;
  REQUIRE(std::regex_search(r.out, pct, std::regex("\\| ([0-9]+)%(\\*?) \\|")));
  if (std::stoi(pct[1].str()) > 100) {
    CHECK(pct[2].str() == "*");
    CHECK(r.out.find("* above 100% of the probe: a decode step reads only ") != std::string::npos);
  } else {
    CHECK(r.out.find("above 100%") == std::string::npos);
  }
}

// The two reasons a decode row can exceed the probe: a step small enough for the caches, or
// (a step larger than them) a host whose bandwidth moved; a 1.9 GiB F16 step was once said to
// stay in the caches, and so was a 574 MiB Q4_0 step (smaller than the probe's 1 GiB, but not
// than a 32 MiB L3).
TEST_CASE("bench: a decode row above the probe is explained by its size", "[cli]") {
  llmctl::cli::BenchOptions opt;
  opt.probe_mib = 1024;
  llmctl::cli::BenchProbes probes;
  probes.gb_s = 30;
  probes.cache_bytes = 32.0 * 1024 * 1024;
  llmctl::cli::BenchRow small, mid, large, under;
  small.bw_pct = 250;
  small.step_bytes = 1.0e6;
  mid.bw_pct = 107;
  mid.step_bytes = 574.0 * 1024 * 1024;
  large.bw_pct = 113;
  large.step_bytes = 2.08e9;
  under.bw_pct = 90;
  under.step_bytes = 2.08e9;
  const std::string both = llmctl::cli::bench_footnotes(opt, {small, large, under}, probes);
  CHECK(count_lines_with(both, "which stays in the CPU's 32.00 MiB cache") == 1);
  CHECK(count_lines_with(both, "memory bandwidth changed between the probe and the test") == 1);
  const std::string big = llmctl::cli::bench_footnotes(opt, {large}, probes);
  CHECK(big.find("caches") == std::string::npos);
  CHECK(big.find("reads 1.94 GiB from memory, more than the CPU's 32.00 MiB cache") !=
        std::string::npos);
  const std::string medium = llmctl::cli::bench_footnotes(opt, {mid}, probes);
  CHECK(medium.find("stays in") == std::string::npos);
  CHECK(medium.find("reads 574.00 MiB from memory, more than the CPU's 32.00 MiB cache") !=
        std::string::npos);
  CHECK(llmctl::cli::bench_footnotes(opt, {under}, probes).empty());
  // the cache size unknown (a GPU): a step under the probe's buffer may be either
  probes.cache_bytes = 0;
  const std::string unknown = llmctl::cli::bench_footnotes(opt, {mid, large}, probes);
  CHECK(count_lines_with(unknown, "may stay in the CPU's caches (their size is unknown)") == 1);
  CHECK(count_lines_with(unknown, "no less than the probe's 1.00 GiB") == 1);
}

TEST_CASE("bench: the largest CPU cache is read from sysfs", "[cli]") {
  const int64_t bytes = llmctl::cpu_largest_cache_bytes();
  std::ifstream l2("/sys/devices/system/cpu/cpu0/cache/index2/size");
  if (!l2) {
    CHECK(bytes == 0);  // no sysfs cache entries: unknown, never a guess
    return;
  }
  // Every x86 and Arm server of the last decade has at least 256 KiB of L2, and no cache
  // of a core reaches 4 GiB.
  CHECK(bytes >= 256 * 1024);
  CHECK(bytes < (int64_t{4} << 30));
}

TEST_CASE("the L2 cache's size is read from sysfs by level", "[cli]") {
  const int64_t l2 = llmctl::cpu_cache_bytes(2);
  CHECK(llmctl::cpu_cache_bytes(0) == 0);  // not a level: unknown, not the largest
  CHECK(llmctl::cpu_cache_bytes(9) == 0);  // no CPU has one
  std::ifstream level("/sys/devices/system/cpu/cpu0/cache/index2/level");
  int index2_level = 0;
  if (!(level >> index2_level) || index2_level != 2) return;  // not the usual x86 layout
  // at least 256 KiB (as above), and never more than the largest cache
  CHECK(l2 >= 256 * 1024);
  CHECK(l2 <= llmctl::cpu_largest_cache_bytes());
  CHECK(llmctl::cpu_cache_bytes(1) < l2);
}

TEST_CASE("svd-embed: the float64 Gram of a normal run is not called a failure", "[cli]") {
  const auto r = run_llmctl({"svd-embed", "-m", stories(), "--device", "cpu", "--no-low-rank"});
  REQUIRE(r.code == 0);
  CHECK(r.out.find("failed") == std::string::npos);
  CHECK(r.out.find("from a float64 Gram matrix (float32 products first: their error bound was above "
                   "--tolerance/2 = 5.0e-07, so the Gram was formed again in float64)") != std::string::npos);
}

TEST_CASE("kvplan: small counts read as counts, levers stay within the model's context", "[cli]") {
  const auto r = run_llmctl({"kvplan", "-m", stories(), "--explain", "--no-sweep"});
  REQUIRE(r.code == 0);
  CHECK(r.out.find("0.00 B active params") == std::string::npos);
  CHECK(r.out.find(" active params x tokens") != std::string::npos);
  CHECK(r.out.find(" 1 sequences") == std::string::npos);
  CHECK(r.out.find("1 sequence") != std::string::npos);
  CHECK(r.out.find("0.00 GiB (0.00 GB)") == std::string::npos);

  // 4M tokens of Llama 3.2 1B (configured for 131072): no lever suggests more than that.
  const auto big = run_llmctl({"kvplan", "-m", "llama-3.2-1b", "-c", "4000000", "--no-sweep"});
  REQUIRE(big.code == 0);
  CHECK(big.out.find("-c 131072 (the model's configured context)") != std::string::npos);
  const std::regex ctx_lever("(--ctx|-c) ([0-9]+) \\(");
  for (std::sregex_iterator it(big.out.begin(), big.out.end(), ctx_lever), end; it != end; ++it)
    CHECK(std::stoll((*it)[2].str()) <= 131072);
}

TEST_CASE("quantize: a warning many tensors share is printed once, with a count", "[cli]") {
  const std::string out = llmctl::test::temp_dir() + "/w.gguf";
  const auto r = run_llmctl({"quantize", stories(), out, "--type", "q4_k_m", "--dry-run"});
  REQUIRE(r.code == 0);
  // Every matrix of stories260K has rows of 64, shorter than a K-quant block.
  CHECK(count_lines_with(r.err, "llmctl: warning:") < 10);  // one per distinct text (36 before)
  std::smatch m;
  REQUIRE(std::regex_search(r.err, m,
                            std::regex("llmctl: warning: ([0-9]+) tensors: row length 64 is not a multiple "
                                       "of the Q4_K block size 256; writing Q5_0 instead \\(first: "
                                       "'token_embd.weight'\\)\n")));
  CHECK(std::stoi(m[1].str()) > 10);
}
