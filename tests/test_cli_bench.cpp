// `llmctl bench` as scripts call it: one row per model x thread count x test, JSON and CSV
// shapes, the summary line, usage errors. No assertion on speed (benchmarks are not tests).
#include <catch2/catch.hpp>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "support/run_cli.h"
#include "support/test_data.h"

using llmctl::test::require_test_file;
using llmctl::test::run_llmctl;

TEST_CASE("bench: rows per model, thread count and test, in JSON and CSV", "[cli]") {
  const std::string model = require_test_file("models/stories260K.gguf");
  auto r = run_llmctl({"bench", "-m", model, "-p", "16", "-n", "8", "-r", "2", "-t", "1,2",
                       "--probe-mib", "16", "--json"});
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(j["rows"].size() == 4);
  CHECK(j["rows"][0]["test"] == "pp16");
  CHECK(j["rows"][1]["test"] == "tg8");
  CHECK(j["rows"][2]["threads"] == 2);
  CHECK(j["rows"][0]["type"] == "F32");
  CHECK(j["rows"][1]["tok_s"].get<double>() > 0);
  CHECK(j["rows"][1]["gb_s"].get<double>() > 0);  // decode rows carry bandwidth
  CHECK(j["probe_gb_s"].get<double>() > 0);
  CHECK(r.err.find("llmctl-bench: rows=4 ") != std::string::npos);
  // the CPU matmul kernels that ran, and their instruction set
  const std::string isa = j["rows"][0]["matmul_isa"];
  CHECK((isa == "scalar" || isa == "avx2" || isa == "avx512"));
  CHECK(j["rows"][0]["matmul_kernels"].get<std::string>().rfind("f32 ", 0) == 0);

  r = run_llmctl({"bench", "-m", model, "-p", "0", "-n", "4", "-r", "1", "--probe-mib", "0", "--csv"});
  REQUIRE(r.code == 0);
  CHECK(r.out.rfind("model,type,bytes,params,threads,test,tok_s,sd,gb_s,bw_pct,gflop_s\n", 0) == 0);
  CHECK(r.out.find(",tg4,") != std::string::npos);
  CHECK(r.out.find(",pp") == std::string::npos);  // -p 0 skips prefill
}

TEST_CASE("bench: usage and input errors", "[cli]") {
  CHECK(run_llmctl({"bench"}).code == 2);
  CHECK(run_llmctl({"bench", "-m", "x.gguf", "-t", "-1"}).code == 2);  // -t 0: every core
  const auto r = run_llmctl({"bench", "-m", "/nonexistent.gguf", "--probe-mib", "0"});
  CHECK(r.code == 1);
  CHECK(r.err.find("/nonexistent.gguf") != std::string::npos);
}

TEST_CASE("bench: LLMCTL_MATMUL_ISA forces the CPU kernels, and the table says which ran", "[cli]") {
  const std::string model = require_test_file("models/stories260K.gguf");
  setenv("LLMCTL_MATMUL_ISA", "scalar", 1);
  const auto r = run_llmctl({"bench", "-m", model, "-p", "8", "-n", "4", "-r", "1", "-t", "1",
                             "--probe-mib", "0"});
  setenv("LLMCTL_MATMUL_ISA", "nonsense", 1);
  const auto bad = run_llmctl({"bench", "-m", model, "-p", "8", "-n", "4", "-r", "1", "-t", "1",
                               "--probe-mib", "0"});
  unsetenv("LLMCTL_MATMUL_ISA");
  REQUIRE(r.code == 0);
  CHECK(r.out.find("CPU matmul isa scalar: f32 scalar") != std::string::npos);
  CHECK(r.err.find("matmul isa scalar (f32 scalar)") != std::string::npos);
  CHECK(bad.code == 1);
  CHECK(bad.err.find("LLMCTL_MATMUL_ISA") != std::string::npos);
}
