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
  // the compute peak per thread count; pp rows put against it, tg rows not
  REQUIRE(j["peak_probes"].size() == 2);
  CHECK(j["peak_probes"][0]["threads"] == 1);
  CHECK(j["peak_probes"][1]["threads"] == 2);
  CHECK(j["peak_gflop_s_f32"] == j["peak_probes"][1]["gflop_s_f32"]);  // the most threads
  CHECK(j["peak_gop_s_int8"].get<double>() > 0);
  for (size_t i : {size_t{0}, size_t{2}}) {
    const auto& row = j["rows"][i];
    CHECK(row["peak_kind"] == "f32");  // F32 weights: FMAs
    const double peak = j["peak_probes"][i / 2]["gflop_s_f32"];
    CHECK(row["peak_pct"].get<double>() ==
          Approx(100.0 * row["gflop_s"].get<double>() / peak).epsilon(1e-12));
  }
  for (size_t i : {size_t{1}, size_t{3}}) {
    CHECK(j["rows"][i]["peak_pct"].is_null());
    CHECK(j["rows"][i]["peak_kind"].is_null());
  }
  CHECK(r.err.find(" peak_gflop_s_f32=") != std::string::npos);

  r = run_llmctl({"bench", "-m", model, "-p", "0", "-n", "4", "-r", "1", "--probe-mib", "0", "--csv"});
  REQUIRE(r.code == 0);
  CHECK(r.out.rfind("model,type,bytes,params,threads,test,tok_s,sd,gb_s,bw_pct,gflop_s,peak_pct\n",
                    0) == 0);
  CHECK(r.out.find(",tg4,") != std::string::npos);
  CHECK(r.out.find(",pp") == std::string::npos);  // -p 0 skips prefill
  CHECK(r.out.back() == '\n');
  CHECK(r.out[r.out.size() - 2] == ',');  // a tg row: no peak_pct
  CHECK(r.err.find("peak_gflop_s_f32") == std::string::npos);  // --probe-mib 0: no probes
}

TEST_CASE("bench: prefill of a quantized model against the int8 peak, in JSON and the table",
          "[cli]") {
  const std::string model = require_test_file("models/SmolLM2-135M-Instruct.Q4_1.gguf");
  auto r = run_llmctl({"bench", "-m", model, "-p", "8", "-n", "2", "-r", "1", "-t", "1",
                       "--probe-mib", "16", "--json"});
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(j["rows"].size() == 2);
  const auto& pp = j["rows"][0];
  CHECK(pp["type"] == "Q4_1");
  CHECK(pp["peak_kind"] == "int8");  // int8 activations against the weights' integers
  CHECK(pp["peak_pct"].get<double>() ==
        Approx(100.0 * pp["gflop_s"].get<double>() / j["peak_gop_s_int8"].get<double>())
            .epsilon(1e-12));
  CHECK(j["rows"][1]["peak_pct"].is_null());

  r = run_llmctl({"bench", "-m", model, "-p", "8", "-n", "2", "-r", "1", "-t", "1",
                  "--probe-mib", "16"});
  REQUIRE(r.code == 0);
  CHECK(r.out.find("| GFLOP/s | % of peak |") != std::string::npos);
  CHECK(r.out.find("% int8 |") != std::string::npos);
  CHECK(r.out.find("compute peak (probe, ") != std::string::npos);
  CHECK(r.out.find(" 1 threads): f32 FMA ") != std::string::npos);
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
