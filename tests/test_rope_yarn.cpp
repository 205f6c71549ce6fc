// YaRN rope scaling (core/rope_math.h rope_angle; config readers set_rope_yarn) against
// transformers: tests/fixtures/hf_tiny_llama_yarn (tools/gen_rope_yarn_fixture.py) is a tiny
// random Llama with rope_scaling yarn (factor 4, original context 16, beta_fast 16) whose
// float64 logits transformers computed over 40 positions, 24 of them past the original context.
// Also: the HF -> GGUF writer's YaRN keys read back to the same angles (and logits), the
// correction range and attention factor as transformers derives them, and both CPU backends.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_fast_backend.h"
#include "core/rope_math.h"
#include "model/forward.h"
#include "model/hf_to_gguf.h"
#include "model/model_loader.h"
#include "support/fixtures.h"
#include "support/test_data.h"

using namespace llmctl;
using llmctl::test::fixture_path;

namespace {

const char* const kFixture = "hf_tiny_llama_yarn";

nlohmann::json reference() {
  return nlohmann::json::parse(
      llmctl::test::read_file(fixture_path(std::string(kFixture) + "/reference_logits.json")));
}

std::vector<std::vector<float>> run_logits(const LoadedModel& m, const std::vector<int32_t>& tokens,
                                           Backend& backend) {
  Forward fwd(m.config, m.weights, backend, static_cast<int64_t>(tokens.size()));
  std::vector<std::vector<float>> out;
  for (const int32_t t : tokens) out.push_back(fwd.step(t));
  return out;
}

template <typename T>
double max_abs_diff(const std::vector<std::vector<float>>& a, const std::vector<std::vector<T>>& b,
                    size_t first = 0) {
  REQUIRE(a.size() == b.size());
  double worst = 0.0;
  for (size_t p = first; p < a.size(); ++p) {
    REQUIRE(a[p].size() == b[p].size());
    for (size_t i = 0; i < a[p].size(); ++i)
      worst =
          std::max(worst, std::abs(static_cast<double>(a[p][i]) - static_cast<double>(b[p][i])));
  }
  return worst;
}

}  // namespace

TEST_CASE("YaRN: config.json rope_scaling gives transformers' correction range and factor",
          "[cpu]") {
  const LoadedModel m = load_model(fixture_path(kFixture));
  const ModelConfig& c = m.config;
  CHECK(c.rope_scaling_type == "yarn");
  CHECK(c.rope_freq_scale == Approx(0.25));
  CHECK(c.rope_ext_factor == 1.0);
  // find_correction_range(16, 1, dim 32, base 50, 16): floor(-7.5) -> 0, ceil(3.82) = 4.
  CHECK(c.rope_yarn_low == 0.0);
  CHECK(c.rope_yarn_high == 4.0);
  CHECK(c.rope_mscale == Approx(1.0 + 0.1 * std::log(4.0)));
}

TEST_CASE("YaRN: reference logits match transformers past the original context", "[cpu][golden]") {
  const nlohmann::json ref = reference();
  const auto tokens = ref["tokens"].get<std::vector<int32_t>>();
  const auto want = ref["logits"].get<std::vector<std::vector<double>>>();
  // The fixture must be able to tell: without YaRN the logits move by units.
  REQUIRE(ref["unscaled_delta"].get<double>() > 0.5);
  const LoadedModel m = load_model(fixture_path(kFixture));
  cpu::CpuBackend reference_backend;
  const double diff = max_abs_diff(run_logits(m, tokens, reference_backend), want);
  WARN("hf_tiny_llama_yarn: max |logit - transformers| = " << diff);
  CHECK(diff < 1e-3);
  // Past the original context alone (positions 16 .. 39).
  CHECK(max_abs_diff(run_logits(m, tokens, reference_backend), want, 16) < 1e-3);
  // The fast path rotates with the same rope_rows: float weights keep it close.
  cpu::CpuFastBackend fast(2);
  CHECK(max_abs_diff(run_logits(m, tokens, fast), want) < 1e-2);
}

// llama.cpp on a YaRN GGUF written by gguf-py from the same weights (model.gguf,
// llamacpp_logits.json: tools/gen_yarn_llamacpp_fixture.py, which checked llama.cpp against
// transformers within 1.1e-5): the GGUF keys read as llama.cpp reads them.
TEST_CASE("YaRN: a gguf-py GGUF matches llama.cpp past the original context", "[cpu][golden]") {
  const nlohmann::json ref = nlohmann::json::parse(llmctl::test::read_file(
      fixture_path(std::string(kFixture) + "/llamacpp_logits.json")));
  const auto tokens = ref["tokens"].get<std::vector<int32_t>>();
  const auto want = ref["logits"].get<std::vector<std::vector<double>>>();
  const LoadedModel m = load_model(fixture_path(std::string(kFixture) + "/model.gguf"));
  CHECK(m.config.rope_scaling_type == "yarn");
  cpu::CpuBackend backend;
  const double diff = max_abs_diff(run_logits(m, tokens, backend), want);
  WARN("hf_tiny_llama_yarn GGUF: max |logit - llama.cpp| = " << diff);
  CHECK(diff < 1e-3);
  // Greedy continuation, one token per step, as the generator ran llama.cpp.
  Forward fwd(m.config, m.weights, backend, static_cast<int64_t>(tokens.size()) + 8);
  std::vector<float> row;
  for (const int32_t t : tokens) row = fwd.step(t);
  std::vector<int32_t> greedy;
  for (size_t i = 0; i < ref["greedy_ids"].size(); ++i) {
    greedy.push_back(static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin()));
    if (i + 1 < ref["greedy_ids"].size()) row = fwd.step(greedy.back());
  }
  CHECK(greedy == ref["greedy_ids"].get<std::vector<int32_t>>());
}

TEST_CASE("YaRN: hf -> GGUF keeps the scaling (same angles, same logits)", "[cpu]") {
  const LoadedModel hf = load_model(fixture_path(kFixture));
  HfToGgufOptions opt;
  opt.type = GgmlType::F32;
  const std::string path = llmctl::test::temp_dir() + "/yarn.gguf";
  hf_to_gguf(hf, opt).write(path);
  const LoadedModel g = load_model(path);
  CHECK(g.config.rope_scaling_type == "yarn");
  CHECK(g.config.rope_yarn_low == hf.config.rope_yarn_low);
  CHECK(g.config.rope_yarn_high == hf.config.rope_yarn_high);
  CHECK(g.config.rope_mscale == Approx(hf.config.rope_mscale).epsilon(1e-6));
  const auto tokens = reference()["tokens"].get<std::vector<int32_t>>();
  cpu::CpuBackend backend;
  const auto a = run_logits(hf, tokens, backend);
  const auto b = run_logits(g, tokens, backend);
  CHECK(max_abs_diff(a, b) < 1e-4);
}

TEST_CASE("YaRN angle: extrapolated below the range, interpolated above, mixed between", "[cpu]") {
  // Pair 0 (low 1): the trained angle; pair 9 (high 8): freq_scale times it; pair 4: halfway
  // ((4 - 1) / 7 of the ramp interpolated).
  const int64_t pos = 1000, n_rot = 20;
  const double base = 10000.0, fs = 0.125;
  auto trained = [&](int64_t pair) { return rope_theta(pos, pair, n_rot, base, 1.0); };
  CHECK(rope_angle(pos, 0, n_rot, base, fs, 1.0, 1.0, 1.0, 8.0) == Approx(trained(0)));
  CHECK(rope_angle(pos, 9, n_rot, base, fs, 1.0, 1.0, 1.0, 8.0) == Approx(fs * trained(9)));
  const double mix = 1.0 - 3.0 / 7.0;
  CHECK(rope_angle(pos, 4, n_rot, base, fs, 1.0, 1.0, 1.0, 8.0) ==
        Approx(fs * trained(4) * (1.0 - mix) + trained(4) * mix));
  // Without YaRN: exactly the plain angle over the factor (bit for bit).
  const double plain = rope_theta(pos, 4, n_rot, base, fs) / 2.0;
  CHECK(rope_angle(pos, 4, n_rot, base, fs, 2.0, 0.0, 1.0, 8.0) == plain);
}
