// `llmctl rope-probe` as CI runs it on stories260K: --check passes on the real model and fails
// (exit 3, naming the sweep) on a copy whose llama.rope.freq_base was changed; --json fields;
// --baseline drift; --svg files; usage and input errors.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "support/run_cli.h"
#include "support/test_data.h"

using llmctl::test::require_test_file;
using llmctl::test::run_llmctl;

namespace {

// A short distance curve keeps each run well under a second.
const std::vector<std::string> kFast = {"--distance-ctx", "128", "--offsets", "1024,32768"};

std::vector<std::string> args(std::vector<std::string> a) {
  a.insert(a.end(), kFast.begin(), kFast.end());
  return a;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("rope-probe: tables and --check pass on stories260K", "[cli]") {
  const std::string model = require_test_file("models/stories260K.gguf");
  const auto r = run_llmctl(args({"rope-probe", "-m", model, "--check", "--device", "cpu"}));
  INFO(r.err);
  REQUIRE(r.code == 0);
  for (const char* h : {"## 1. Shift invariance", "Angle precision", "## 2. Position ablation",
                        "## 3. Distance", "## 4. Configuration sweep", "all checks pass"})
    CHECK(contains(r.out, h));
  CHECK(contains(r.err, "llmctl-rope-probe: checks=run failed=0"));
}

TEST_CASE("rope-probe: --json fields, --baseline drift and --svg", "[cli]") {
  const std::string model = require_test_file("models/stories260K.gguf");
  const std::string dir = llmctl::test::temp_dir();
  auto r = run_llmctl(args(
      {"rope-probe", "-m", model, "--json", "--rope-theta", "100000", "--svg", dir + "/rope.svg"}));
  INFO(r.err);
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(j["shift"].size() == 3);
  CHECK(j["shift"][0]["offset"] == 0);
  CHECK(j["shift"][0]["kl_max"].get<double>() == 0.0);
  CHECK(j["shift"][2]["offset"] == 32768);
  CHECK(j["shift"][2]["kl_max"].get<double>() <= j["thresholds"]["max_shift_kl"].get<double>());
  CHECK(j["ablation"]["kl_zero_mean"].get<double>() >
        j["thresholds"]["min_ablation_kl"].get<double>());
  CHECK(j["config"]["rope_freq_base"].get<double>() == 10000.0);
  REQUIRE(j["distance"]["curves"].size() == 2);
  CHECK(j["distance"]["curves"][1]["label"] == "theta 100000");
  CHECK(j["distance"]["curves"][0]["points"][0]["n_filler"] == 0);
  CHECK(j["sweep"]["rows"].size() == 5);
  CHECK(j["sweep"]["rows"][0]["configured"] == true);
  CHECK(j["failures"].empty());
  for (const char* f : {"/rope.svg", "/rope-angles.svg"}) {
    const std::string svg = llmctl::test::read_file(dir + f);
    CHECK(contains(svg, "<svg"));
    CHECK(contains(svg, "</svg>"));
  }

  llmctl::test::write_file(dir + "/base.json", r.out);
  r = run_llmctl(args(
      {"rope-probe", "-m", model, "--rope-theta", "100000", "--baseline", dir + "/base.json"}));
  CHECK(r.code == 0);
  auto drifted = j;
  drifted["sweep"]["rows"][1]["nll"] = j["sweep"]["rows"][1]["nll"].get<double>() + 0.5;
  llmctl::test::write_file(dir + "/drift.json", drifted.dump());
  r = run_llmctl(args(
      {"rope-probe", "-m", model, "--rope-theta", "100000", "--baseline", dir + "/drift.json"}));
  CHECK(r.code == 3);
  CHECK(contains(r.err, "baseline: sweep.rows[1].nll"));
}

TEST_CASE("rope-probe --check fails on a copy with a changed rope.freq_base", "[cli]") {
  const std::string model = require_test_file("models/stories260K.gguf");
  const std::string dir = llmctl::test::temp_dir();
  const llmctl::GgufFile file = llmctl::GgufFile::open(model);
  llmctl::GgufBuilder b = llmctl::GgufBuilder::from_file(file);
  b.set("llama.rope.freq_base", llmctl::gguf_value::f32(100000.0f));
  b.write(dir + "/wrong-base.gguf");
  const auto r = run_llmctl(args({"rope-probe", "-m", dir + "/wrong-base.gguf", "--check"}));
  CHECK(r.code == 3);
  CHECK(contains(r.err, "sweep: 'base /10'"));
  CHECK(contains(r.err, "the metadata may be wrong"));
  CHECK(contains(r.out, "FAIL sweep:"));
  CHECK(!contains(r.err, "shift:"));  // RoPE stays relative whatever the base
}

TEST_CASE("rope-probe: usage and input errors", "[cli]") {
  const std::string model = require_test_file("models/stories260K.gguf");
  auto r = run_llmctl({"rope-probe", "-m", model, "--rope-scale", "log:2"});
  CHECK(r.code == 2);
  CHECK(contains(r.err, "linear:F"));
  CHECK(run_llmctl({"rope-probe", "-m", model, "--rope-scale", "linear:0"}).code == 2);
  CHECK(run_llmctl({"rope-probe", "-m", model, "--distance-ctx", "-1"}).code == 2);
  CHECK(run_llmctl({"rope-probe", "-m", model, "--offsets", "-5"}).code == 2);
  r = run_llmctl({"rope-probe", "-m", model, "--offsets", "3000000000"});
  CHECK(r.code == 1);
  CHECK(contains(r.err, "offset 3000000000"));
  r = run_llmctl({"rope-probe", "-m", "/nonexistent.gguf"});
  CHECK(r.code == 1);
  CHECK(contains(r.err, "/nonexistent.gguf"));
  r = run_llmctl({"rope-probe", "-m", model, "--baseline", "/nonexistent.json"});
  CHECK(r.code == 1);
  CHECK(run_llmctl({"rope-probe", "--help"}).out.find("--max-shift-kl") != std::string::npos);
}
