// `llmctl run --moe-stats` as a user calls it: the option in the help, and on a model without
// experts (stories260K) an error before anything is generated, in every mode of run; on the
// MoE fixture the table, the JSON (whose counts must add up), --batch records equal to their
// requests alone, and the -i line.
#include <catch2/catch.hpp>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/fixtures.h"
#include "support/run_cli.h"
#include "support/test_data.h"

using llmctl::test::require_test_file;
using llmctl::test::run_llmctl;

TEST_CASE("run --moe-stats: in the help, with what each column means", "[cli]") {
  const auto help = run_llmctl({"run", "--help"});
  REQUIRE(help.code == 0);
  for (const char* s : {"--moe-stats", "Router statistics of a mixture-of-experts model",
                        "top-k mass", "max_load", "never\n    chosen", "\"moe_stats\""})
    CHECK(help.out.find(s) != std::string::npos);
}

TEST_CASE("run --moe-stats on a dense model: an error naming it, in every mode, nothing generated",
          "[cli]") {
  const std::string model = require_test_file("models/stories260K.gguf");
  const std::vector<std::vector<std::string>> modes = {
      {"run", "-m", model, "-p", "Once", "-n", "4", "--moe-stats"},
      {"run", "-m", model, "-p", "Once", "-n", "4", "--moe-stats", "--attn-stats", "--json"},
      {"run", "-m", model, "--batch", "-", "-n", "4", "--moe-stats"},
      {"run", "-m", model, "-i", "--chat-template", "chatml", "-n", "4", "--moe-stats"}};
  for (const auto& args : modes) {
    CAPTURE(args);
    const auto r = run_llmctl(args, "{\"prompt\": \"x\"}\n");
    CHECK(r.code == 1);
    CHECK(r.out.empty());
    CHECK(r.err.find("llmctl: error: --moe-stats: " + model + " (llama) has no experts") !=
          std::string::npos);
    CHECK(r.err.find("mixture-of-experts models") != std::string::npos);  // the hint
    CHECK(r.err.find("llmctl-run:") == std::string::npos);                // no summary line
  }
  // The same command without the flag runs.
  CHECK(run_llmctl({"run", "-m", model, "-p", "Once", "-n", "4"}).code == 0);
}

// ---- end to end on a model with experts (tests/fixtures/family_moe_mixtral, the moe branch's
// random-weight Mixtral-shaped fixture: llama with ffn_*_exps, top-2 routing) ----------------

namespace {

const std::string& moe_model() {
  static const std::string path = llmctl::test::fixture_path("family_moe_mixtral/model.gguf");
  return path;
}

std::vector<std::string> greedy_moe(std::initializer_list<const char*> more) {
  std::vector<std::string> a{"run", "-m", moe_model(), "-p", "Once upon a time", "-n", "8",
                             "--temp", "0", "--ignore-eos"};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

// What every --moe-stats object must satisfy whatever the weights: the counts of each layer
// add up to its tokens x k, never_chosen lists exactly the experts with no token, entropy in
// [0, ln E], top-k mass in (0, 1], max_load in [1, E / k].
void check_consistent(const nlohmann::json& m, int64_t n_tokens) {
  const int64_t e = m["n_experts"].get<int64_t>(), k = m["k"].get<int64_t>();
  REQUIRE(e >= 2);
  REQUIRE(k >= 1);
  CHECK(m["n_tokens"] == n_tokens);
  CHECK(m["uniform_entropy"].get<double>() == Approx(std::log(static_cast<double>(e))));
  REQUIRE(m["layers"].size() == m["n_layers"].get<size_t>());  // Mixtral: every layer routed
  for (const nlohmann::json& l : m["layers"]) {
    INFO("layer " << l["layer"]);
    CHECK(l["tokens"] == n_tokens);
    const auto counts = l["expert_tokens"].get<std::vector<int64_t>>();
    REQUIRE(static_cast<int64_t>(counts.size()) == e);
    int64_t total = 0;
    std::vector<int32_t> idle;
    for (size_t i = 0; i < counts.size(); ++i) {
      total += counts[i];
      if (counts[i] == 0) idle.push_back(static_cast<int32_t>(i));
    }
    CHECK(total == n_tokens * k);
    CHECK(l["never_chosen"].get<std::vector<int32_t>>() == idle);
    const double h = l["entropy"].get<double>(), mass = l["top_k_mass"].get<double>();
    CHECK(h >= 0.0);
    CHECK(h <= std::log(static_cast<double>(e)) + 1e-12);
    CHECK(mass > 0.0);
    CHECK(mass <= 1.0 + 1e-12);
    CHECK(l["max_load"].get<double>() >= 1.0 - 1e-12);
    CHECK(l["max_load"].get<double>() <= static_cast<double>(e) / static_cast<double>(k) + 1e-12);
    CHECK(l["nonfinite_rows"] == 0);
  }
}

}  // namespace

TEST_CASE("run --moe-stats on a MoE model: the table, the same text, the summary line last",
          "[cli]") {
  const auto plain = run_llmctl(greedy_moe({}));
  const auto r = run_llmctl(greedy_moe({"--moe-stats"}));
  REQUIRE(plain.code == 0);
  REQUIRE(r.code == 0);
  CHECK(r.out == plain.out);
  CHECK(r.err.find("moe statistics: ") != std::string::npos);
  CHECK(r.err.find("layer  tokens entropy top_k_mass max_load  idle") != std::string::npos);
  CHECK(r.err.rfind("llmctl-run: ") > r.err.find("moe statistics: "));
}

TEST_CASE("run --moe-stats --json on a MoE model: counts that add up, the tokens attn-stats saw",
          "[cli]") {
  const auto r = run_llmctl(greedy_moe({"--moe-stats", "--attn-stats", "--json"}));
  REQUIRE(r.code == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  REQUIRE(j.contains("moe_stats"));
  REQUIRE(j.contains("attn_stats"));
  // The prompt and every generated token but the last (never fed back).
  const auto n_tokens =
      static_cast<int64_t>(j["prompt_ids"].size() + j["generated_ids"].size()) - 1;
  CHECK(j["attn_stats"]["n_tokens"] == n_tokens);
  check_consistent(j["moe_stats"], n_tokens);
  // The same numbers with --moe-stats alone (the fanout changes nothing).
  const nlohmann::json alone = nlohmann::json::parse(run_llmctl(greedy_moe({"--moe-stats", "--json"})).out);
  CHECK(alone["moe_stats"] == j["moe_stats"]);
}

TEST_CASE("run --batch --moe-stats: each record's statistics are its request's alone", "[cli]") {
  const char* prompts[] = {"Once upon a time", "The cat sat", "Once upon a time there"};
  std::string lines;
  for (const char* p : prompts) lines += nlohmann::json{{"prompt", p}}.dump() + "\n";
  const auto b = run_llmctl({"run", "-m", moe_model(), "--batch", "-", "--parallel", "3", "-n",
                             "6", "--temp", "0", "--ignore-eos", "--moe-stats"},
                            lines);
  REQUIRE(b.code == 0);
  std::vector<nlohmann::json> records;
  size_t start = 0;
  for (size_t nl; (nl = b.out.find('\n', start)) != std::string::npos; start = nl + 1)
    records.push_back(nlohmann::json::parse(b.out.substr(start, nl - start)));
  REQUIRE(records.size() == 3);
  for (const nlohmann::json& rec : records) {
    const auto i = rec["index"].get<size_t>();
    INFO("line " << i);
    const auto alone = run_llmctl({"run", "-m", moe_model(), "-p", prompts[i], "-n", "6", "--temp",
                                   "0", "--ignore-eos", "--moe-stats", "--json"});
    REQUIRE(alone.code == 0);
    const nlohmann::json a = nlohmann::json::parse(alone.out);
    CHECK(rec["generated_ids"] == a["generated_ids"]);
    REQUIRE(rec.contains("moe_stats"));
    CHECK(rec["moe_stats"] == a["moe_stats"]);  // bit for bit: routing is batch invariant
  }
}

TEST_CASE("run -i --moe-stats: one line per turn", "[cli]") {
  const auto r = run_llmctl({"run", "-m", moe_model(), "-i", "--chat-template", "chatml", "-n",
                             "4", "--temp", "0", "--moe-stats"},
                            "hi\nagain\n");
  REQUIRE(r.code == 0);
  CHECK(r.err.find("llmctl: moe-stats: turn 1: ") != std::string::npos);
  CHECK(r.err.find("llmctl: moe-stats: turn 2: ") != std::string::npos);
  CHECK(r.err.find("(layer, expert) pairs never chosen") != std::string::npos);
}
