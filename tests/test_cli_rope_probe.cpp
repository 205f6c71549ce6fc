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

TEST_CASE("rope-probe --probes runs some probes and judges only those", "[cli]") {
  const std::string model = require_test_file("models/stories260K.gguf");
  auto r = run_llmctl({"rope-probe", "-m", model, "--probes", "sweep,ablation", "--json"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["probes"] == nlohmann::json({"ablation", "sweep"}));
  CHECK(!j.contains("shift"));
  CHECK(!j.contains("distance"));
  CHECK(j["sweep"]["rows"].size() == 5);
  CHECK(j["config"]["rope_layers"].size() == 1);
  r = run_llmctl({"rope-probe", "-m", model, "--probes", "shift", "--offsets", "1024"});
  CHECK(r.code == 0);
  CHECK(contains(r.out, "## 1. Shift invariance"));
  CHECK(!contains(r.out, "## 4. Configuration sweep"));
  CHECK(contains(r.err, "on cpu (f32 activations)"));
  r = run_llmctl({"rope-probe", "-m", model, "--probes", "shift,typo"});
  CHECK(r.code == 2);
  CHECK(contains(r.err, "'typo' is not a probe"));
  CHECK(run_llmctl({"rope-probe", "-m", model, "--probes", "sweep", "--svg", "x.svg"}).code == 2);
}

TEST_CASE("rope-probe --check passes on SmolLM2 and fails on a copy with base /10", "[cli][slow]") {
  // The default sweep text: shorter ones cannot rank base x10 on a healthy file (at 77
  // tokens SmolLM2's base 1e6 fits 0.025 nats better than its 1e5; at 183, 0.06 worse).
  const std::string model = require_test_file("models/SmolLM2-135M-Instruct.Q4_1.gguf");
  auto r = run_llmctl({"rope-probe", "-m", model, "--check", "--offsets", "1024,32768",
                       "--distance-ctx", "32", "--device", "cpu"});
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK(contains(r.out, "all checks pass"));
  CHECK(contains(r.err, "llmctl-rope-probe: checks=run failed=0"));

  const std::string dir = llmctl::test::temp_dir();
  llmctl::GgufBuilder b = llmctl::GgufBuilder::from_file(llmctl::GgufFile::open(model));
  b.set("llama.rope.freq_base", llmctl::gguf_value::f32(10000.0f));  // trained with 100000
  b.write(dir + "/wrong-base.gguf");
  r = run_llmctl({"rope-probe", "-m", dir + "/wrong-base.gguf", "--check", "--probes", "sweep",
                  "--text",
                  "Once upon a time, there was a little boy named Tim. Tim had a big "
                  "red truck. He liked to play with his truck every day. One day, Tim went to the "
                  "park with his mom. At the park, he saw a girl named Sue. Sue was sad because "
                  "she lost her doll. Tim wanted to help her. He looked under the tree and behind "
                  "the slide."});
  INFO(r.err);
  CHECK(r.code == 3);
  CHECK(contains(r.err, "sweep: 'base x10'"));
}

TEST_CASE("rope-probe --check passes on Gemma 3 and names its layer groups", "[cli][slow]") {
  const std::string model = llmctl::test::require_fetched_model("gemma-3-270m-q4_k_m.gguf");
  const auto r = run_llmctl({"rope-probe", "-m", model, "--check", "--json", "--offsets", "1024",
                             "--probes", "shift,ablation,sweep", "--device", "cpu"});
  INFO(r.err);
  CHECK(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["failures"].empty());
  const auto& groups = j["config"]["rope_layers"];
  REQUIRE(groups.size() == 2);
  CHECK(groups[0]["local"] == true);
  CHECK(groups[0]["window"] == 512);
  CHECK(groups[0]["rope_freq_base"] == 10000.0);
  CHECK(groups[1]["layers"] == nlohmann::json({5, 11, 17}));
  CHECK(groups[1]["rope_freq_base"] == 1e6);
  std::vector<std::string> names;
  for (const auto& row : j["sweep"]["rows"]) names.push_back(row["name"]);
  CHECK(names == std::vector<std::string>{"configured", "global base x10", "global base /10",
                                          "local base x10", "local base /10", "normal pairs",
                                          "linear x2 (global layers)"});
  CHECK(j["angles"].front()["freq_base"] == 10000.0);  // rows for each base, the local first
  CHECK(j["angles"].back()["freq_base"] == 1e6);
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
  const std::string help = run_llmctl({"rope-probe", "--help"}).out;
  for (const char* s :
       {"--max-shift-kl", "--probes", "--cpu-reference", "f32 activations", "local base"})
    CHECK(help.find(s) != std::string::npos);
}
