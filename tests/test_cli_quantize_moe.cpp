// llmctl quantize and eval on the mixture-of-experts fixtures (tools/gen_moe_fixtures.py):
// the 3-D expert tensors quantized row-wise with llama.cpp's mix rules (ffn_down_exps as
// ffn_down, the router kept F32), checked against llama.cpp's own quantizer
// (llamacpp_quant.json): the type of each tensor and its dequantized values (three sums); the
// quantized file's logits near llama.cpp's on its quantization; eval with --base on the result.
#include <catch2/catch.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "io/gguf.h"
#include "model/forward.h"
#include "model/model_loader.h"
#include "quant/dequant.h"
#include "support/fixtures.h"
#include "support/logit_rows.h"
#include "support/run_cli.h"
#include "support/test_data.h"

using namespace llmctl;
using llmctl::test::fixture_path;
using llmctl::test::max_abs_diff;
using llmctl::test::run_llmctl;

namespace {

const char* const kFamilies[] = {"mixtral", "qwen2moe", "qwen3moe"};
// Also checked against llama.cpp's quantizer: gpt-oss (tools/gen_gptoss_fixture.py; its eval
// is in test_model_gptoss.cpp, with bounds of its own).
const char* const kQuantFamilies[] = {"mixtral", "qwen2moe", "qwen3moe", "gptoss"};
const char* const kMixes[] = {"q8_0", "q4_k_m"};

std::string dir_of(const std::string& family) { return fixture_path("family_moe_" + family); }

std::string quantized(const std::string& family, const std::string& mix) {
  const std::string out = test::temp_dir() + "/moe-" + family + "-" + mix + ".gguf";
  const auto r = run_llmctl(
      {"quantize", dir_of(family) + "/model.gguf", out, "--type", mix, "--force", "-t", "2"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  return out;
}

}  // namespace

TEST_CASE("quantize moe: llama.cpp's types per tensor, and its logits on its own quantization",
          "[cli][golden]") {
  for (const std::string family : kQuantFamilies) {
    const nlohmann::json golden =
        nlohmann::json::parse(test::read_file(dir_of(family) + "/llamacpp_quant.json"));
    const auto tokens = golden["tokens"].get<std::vector<int32_t>>();
    for (const std::string mix : kMixes) {
      INFO(family << " " << mix);
      const std::string path = quantized(family, mix);
      const auto want = golden[mix]["types"].get<std::map<std::string, std::string>>();
      std::map<std::string, std::string> got;
      const GgufFile f = GgufFile::open(path);
      for (const GgufTensorInfo& t : f.tensors()) got[t.name] = ggml_type_name(t.type);
      CHECK(got == want);
      CHECK(got.at("blk.0.ffn_gate_exps.weight") != "F32");  // the 3-D tensors are quantized
      CHECK(got.at("blk.0.ffn_gate_inp.weight") == "F32");   // the router is not
      // The same blocks as llama.cpp's: its dequantized values' sums, x_i, x_i^2, x_i * i / n.
      for (const GgufTensorInfo& t : f.tensors()) {
        INFO(t.name);
        const auto sums = golden[mix]["dequantized_sums"][t.name].get<std::vector<double>>();
        std::vector<float> x(static_cast<size_t>(t.n_elements()));
        dequantize_row(t.type, t.data, x.data(), t.n_elements());
        double s0 = 0.0, s1 = 0.0, s2 = 0.0;
        const auto n = static_cast<double>(x.size());
        for (size_t i = 0; i < x.size(); ++i) {
          const auto v = static_cast<double>(x[i]);
          s0 += v;
          s1 += v * v;
          s2 += v * static_cast<double>(i) / n;
        }
        CHECK(s0 == Approx(sums[0]).epsilon(1e-9).margin(1e-9));
        CHECK(s1 == Approx(sums[1]).epsilon(1e-9));
        CHECK(s2 == Approx(sums[2]).epsilon(1e-9).margin(1e-9));
      }

      const LoadedModel m = load_model(path);
      cpu::CpuBackend be;
      Forward fwd(m.config, m.weights, be, static_cast<int64_t>(tokens.size()));
      std::vector<std::vector<float>> logits;
      for (const int32_t t : tokens) logits.push_back(fwd.step(t));
      const double diff =
          max_abs_diff(logits, golden[mix]["logits"].get<std::vector<std::vector<double>>>());
      WARN(family << " " << mix << ": max |logit - llama.cpp on its own quantization| = " << diff);
      // llama.cpp's quantized matmuls round the activations to Q8_0 as well; llmctl's reference
      // path multiplies the dequantized weights by the float activations, as a float64 numpy
      // pass over llama.cpp's dequantized Q8_0 weights does (0.0415 from llama.cpp for mixtral,
      // llmctl's 0.0415 too; measured 0.03-0.05 here). gpt-oss's tiny model is touchier (gate
      // and up pre-activations of some 4, around swiglu_oai's clamps): 0.51 (Q8_0) and 0.16
      // (Q4_K_M) measured, and the generator's float64 pass over llmctl's dequantized Q8_0
      // file is 0.5105 from llama.cpp as well, so the gap is llama.cpp's activation rounding.
      CHECK(diff < (family == "gptoss" ? 0.75 : 0.1));
    }
  }
}

TEST_CASE("eval moe: a quantized model against its float base", "[cli]") {
  for (const std::string family : kFamilies) {
    for (const std::string mix : kMixes) {
      INFO(family << " " << mix);
      const std::string path = quantized(family, mix);
      const auto r = run_llmctl({"eval", "-m", path, "--base", dir_of(family) + "/model.gguf",
                                 "--builtin-text", "calibration", "-c", "64", "-t", "2", "--json"});
      INFO(r.err);
      REQUIRE(r.code == 0);
      const nlohmann::json j = nlohmann::json::parse(r.out);
      CHECK(j["n_scored"].get<int64_t>() > 1000);
      CHECK(std::isfinite(j["ppl"].get<double>()));
      // Q8_0 barely moves a model, Q4_K_M (here mostly Q5_0: rows of 32) a little more.
      const double kl = j["kl"]["mean"].get<double>();
      WARN(family << " " << mix << ": KL " << kl << ", top-1 " << j["top1_agreement"]);
      CHECK(kl > 0.0);
      CHECK(kl < (mix == "q8_0" ? 1e-3 : 1e-2));
      CHECK(j["top1_agreement"].get<double>() > (mix == "q8_0" ? 0.95 : 0.8));
    }
  }
}
