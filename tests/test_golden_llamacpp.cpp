// llmctl against llama.cpp on a real model (SmolLM2-135M-Instruct, Q4_1): the reference is
// tests/fixtures/llamacpp_smollm2.json, written by tools/llamacpp_reference.py with the
// llama-cpp-python package (llama.cpp's CPU backend, F32 KV cache, no flash attention).
// Checked: prompt ids equal; greedy ids equal up to llama.cpp's first close call (top-2
// logit margin below kCloseCall, where rounding may legitimately pick the other token);
// the last prompt position's logits within a measured tolerance, on both CPU paths.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/fixtures.h"
#include "support/run_cli.h"
#include "support/test_data.h"

using llmctl::test::require_test_file;
using llmctl::test::run_llmctl;
using nlohmann::json;

namespace {

const char* const kModel = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
// Below this top-2 margin the two engines' rounding (Q8_1 activations in llama.cpp, other
// summation orders here) may swap the greedy choice; after it the continuations may differ.
// 0.05 was the first guess and is too tight: on the ChatML prompt both llmctl paths pick
// " " where llama.cpp picks ":" at a margin of 0.109 (the logit tolerance below allows more).
constexpr double kCloseCall = 0.25;
// Last-prompt logits, compared after removing the rows' mean difference (a uniform shift
// leaves every probability unchanged; it was 0.01-0.41 here). Measured on the 7 prompts
// (both paths, llama.cpp 0c1e570, AVX-512 CPU): centered max |d| <= 0.61, centered mean |d|
// <= 0.14, |d std| <= 0.041. For scale, llama.cpp against itself (whole prompt in one batch
// vs one token per batch, which changes its kernels for prompts over 32 tokens) differs by
// centered max 0.55 and mean 0.095 on the same prompts. The bounds leave ~1.7x headroom;
// a wrong RoPE base, norm epsilon or tokenization moves whole rows by far more.
constexpr double kMaxCentered = 1.0;
constexpr double kMeanCentered = 0.25;
constexpr double kStdDiff = 0.1;

json reference() {
  return json::parse(llmctl::test::read_file(llmctl::test::fixture_path("llamacpp_smollm2.json")));
}

std::vector<std::string> run_args(const std::string& model, const json& c, int n_predict) {
  // F32 KV as in the reference; --ignore-eos because llama.cpp's greedy loop does not stop.
  return {"run", "-m",   model, "-p", c["prompt"].get<std::string>(), "-n", std::to_string(n_predict),
          "--temp", "0", "--kv-type", "f32", "-t", "2", "--ignore-eos", "--json"};
}

// The first generated position whose reference top-2 margin is a close call (or n).
size_t first_close_call(const json& steps) {
  for (size_t i = 0; i < steps.size(); ++i)
    if (steps[i]["margin"].get<double>() < kCloseCall) return i;
  return steps.size();
}

// The last row of a --logits-out file (n_prompt rows of n_vocab little-endian float32; the
// host is little-endian like the file).
std::vector<float> last_logits_row(const std::string& path, size_t n_prompt, size_t n_vocab) {
  const std::string bytes = llmctl::test::read_file(path);
  REQUIRE(bytes.size() == n_prompt * n_vocab * sizeof(float));
  std::vector<float> row(n_vocab);
  std::memcpy(row.data(), bytes.data() + (n_prompt - 1) * n_vocab * sizeof(float),
              n_vocab * sizeof(float));
  return row;
}

struct LogitsDiff {
  double shift = 0;      // mean(row) - mean(reference row)
  double max_abs = 0;    // centered: over the sampled ids and the reference top-32
  double mean_abs = 0;
  double d_std = 0;      // whole-row standard deviations
  size_t argmax = 0;
};

LogitsDiff compare_logits(const std::vector<float>& row, const json& ref) {
  LogitsDiff d;
  double s = 0, s2 = 0;
  for (const float f : row) {
    const double v = static_cast<double>(f);
    s += v;
    s2 += v * v;
  }
  const double nv = static_cast<double>(row.size());
  const double mean = s / nv;
  d.shift = mean - ref["mean"].get<double>();
  d.d_std = std::fabs(std::sqrt(std::max(0.0, s2 / nv - mean * mean)) - ref["std"].get<double>());
  d.argmax = static_cast<size_t>(std::max_element(row.begin(), row.end()) - row.begin());

  const size_t stride = ref["stride"].get<size_t>();
  const auto& sampled = ref["sampled"];
  REQUIRE(sampled.size() == (row.size() + stride - 1) / stride);
  double sum_abs = 0;
  size_t n = 0;
  auto visit = [&](size_t id, double want) {
    REQUIRE(id < row.size());
    const double e = std::fabs(static_cast<double>(row[id]) - d.shift - want);
    d.max_abs = std::max(d.max_abs, e);
    sum_abs += e;
    ++n;
  };
  for (size_t k = 0; k < sampled.size(); ++k) visit(k * stride, sampled[k].get<double>());
  for (const auto& p : ref["top"]) visit(p[0].get<size_t>(), p[1].get<double>());
  d.mean_abs = sum_abs / static_cast<double>(n);
  return d;
}

}  // namespace

TEST_CASE("SmolLM2 prompt ids equal llama.cpp's", "[golden][cli]") {
  const std::string model = require_test_file(kModel);
  const json ref = reference();
  REQUIRE(ref["cases"].size() >= 6);
  for (const auto& c : ref["cases"]) {
    INFO("prompt " << c["name"].get<std::string>());
    const auto r = run_llmctl(run_args(model, c, 0));
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK(json::parse(r.out)["prompt_ids"] == c["prompt_ids"]);
  }
}

TEST_CASE("SmolLM2 greedy ids equal llama.cpp's up to its first close call", "[golden][cli][slow]") {
  const std::string model = require_test_file(kModel);
  const json ref = reference();
  const int n_predict = ref["n_predict"].get<int>();
  for (const auto& c : ref["cases"]) {
    const std::string name = c["name"].get<std::string>();
    INFO("prompt " << name);
    const auto r = run_llmctl(run_args(model, c, n_predict));
    INFO(r.err);
    REQUIRE(r.code == 0);
    const json out = json::parse(r.out);
    REQUIRE(out["prompt_ids"] == c["prompt_ids"]);
    const auto& got = out["generated_ids"];
    const auto& steps = c["steps"];
    REQUIRE(got.size() == steps.size());
    const size_t close = first_close_call(steps);
    size_t agree = 0;
    while (agree < got.size() && got[agree] == steps[agree]["id"]) ++agree;
    WARN(name << ": " << agree << " of " << got.size() << " greedy ids equal llama.cpp's (first close call at "
              << close << ")");
    CHECK(agree >= close);
    // At the close call itself llmctl must still pick one of llama.cpp's top two.
    if (agree == close && close < got.size())
      CHECK((got[close] == steps[close]["top"][0][0] || got[close] == steps[close]["top"][1][0]));
  }
}

TEST_CASE("SmolLM2 last prompt logits are within tolerance of llama.cpp's on both CPU paths",
          "[golden][cli][slow]") {
  const std::string model = require_test_file(kModel);
  const json ref = reference();
  const std::string path = llmctl::test::temp_dir() + "/logits.f32";
  for (const bool cpu_reference : {true, false}) {
    for (const auto& c : ref["cases"]) {
      const std::string name = c["name"].get<std::string>();
      INFO("prompt " << name << (cpu_reference ? ", --cpu-reference" : ", fast path"));
      auto args = run_args(model, c, 1);
      args.insert(args.end(), {"--logits-out", path});
      if (cpu_reference) args.push_back("--cpu-reference");
      const auto r = run_llmctl(args);
      INFO(r.err);
      REQUIRE(r.code == 0);
      const json& want = c["last_prompt_logits"];
      const auto row = last_logits_row(path, c["prompt_ids"].size(), want["n_vocab"].get<size_t>());
      const LogitsDiff d = compare_logits(row, want);
      WARN(name << (cpu_reference ? " reference" : " fast") << ": centered max |dlogit| " << d.max_abs
                << ", mean " << d.mean_abs << ", shift " << d.shift << ", d_std " << d.d_std);
      CHECK(d.max_abs < kMaxCentered);
      CHECK(d.mean_abs < kMeanCentered);
      CHECK(d.d_std < kStdDiff);
      if (c["steps"][0]["margin"].get<double>() >= kCloseCall) CHECK(d.argmax == want["argmax"].get<size_t>());
    }
  }
}

// Gemma 3 270M (a real file from PyPI, scripts/fetch-models.sh): its 262k-piece SentencePiece
// vocabulary gives llama.cpp's prompt ids (tests/fixtures/llamacpp_gemma3_270m.json), specials
// such as <start_of_turn> parsed as llama.cpp parses them.
TEST_CASE("Gemma 3 270M prompt ids equal llama.cpp's", "[golden][cli]") {
  const std::string model = llmctl::test::require_fetched_model("gemma-3-270m-q4_k_m.gguf");
  const json ref = json::parse(
      llmctl::test::read_file(llmctl::test::fixture_path("llamacpp_gemma3_270m.json")));
  const json& cases = ref.at("cases");
  REQUIRE(cases.size() >= 5);
  for (const auto& c : cases) {
    INFO("prompt " << c["name"].get<std::string>());
    const auto r = run_llmctl({"tokenize", "-m", model, "--format", "json", c["prompt"].get<std::string>()});
    INFO(r.err);
    REQUIRE(r.code == 0);
    const json out = json::parse(r.out);
    CHECK(out.at("ids") == c["prompt_ids"]);
  }
}
