// quant/quant_mix.h: llmctl's mix rules give every tensor the type llama.cpp's quantizer gives
// it, on tiny models that llama.cpp quantized under each mix (tests/fixtures/
// quant_mix_llamacpp.json from tools/gen_quant_mix_fixture.py, llama-cpp-python 0.3.36).
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "quant/quant_mix.h"
#include "quant/quant_plan.h"
#include "support/fixtures.h"
#include "support/test_data.h"

using namespace llmctl;

namespace {

nlohmann::json fixture() {
  return nlohmann::json::parse(
      llmctl::test::read_file(llmctl::test::fixture_path("quant_mix_llamacpp.json")));
}

std::vector<GgufTensorInfo> tensors_of(const nlohmann::json& model) {
  std::vector<GgufTensorInfo> out;
  for (const auto& t : model["tensors"]) {
    GgufTensorInfo info;
    info.name = t[0].get<std::string>();
    info.shape = t[1].get<std::vector<int64_t>>();
    info.type = info.shape.size() == 1 ? GgmlType::F32 : GgmlType::F16;
    const GgmlTypeTraits tr = ggml_traits(info.type);
    info.n_bytes = static_cast<uint64_t>(info.n_elements()) / tr.block_size * tr.type_size;
    out.push_back(info);
  }
  return out;
}

MixModel model_of(const nlohmann::json& m) {
  MixModel model;
  model.arch = m["arch"].get<std::string>();
  model.n_layer = m["n_layer"].get<int64_t>();
  model.n_head = m["n_head"].get<int64_t>();
  model.n_head_kv = m["n_head_kv"].get<int64_t>();
  model.n_expert = m["n_expert"].get<int64_t>();
  return model;
}

}  // namespace

// Without and with an importance matrix ("mixes_imatrix": llama.cpp's has_imatrix changes the
// first ffn_down layers of Q4_0, Q5_0, IQ4_NL and IQ4_XS).
TEST_CASE("quant mix: every tensor gets llama.cpp's type under every mix", "[cpu]") {
  const nlohmann::json fx = fixture();
  int compared = 0;
  for (const auto& m : fx["models"]) {
    const std::vector<GgufTensorInfo> tensors = tensors_of(m);
    for (const bool imatrix : {false, true}) {
      for (const auto& [mix_name, types] : m[imatrix ? "mixes_imatrix" : "mixes"].items()) {
        const QuantMix* mix = find_quant_mix(mix_name);
        REQUIRE(mix != nullptr);
        QuantOptions o;
        o.type = mix->base;
        o.mix = mix;
        o.model = model_of(m);
        o.has_imatrix = imatrix;
        const QuantPlan plan = plan_quantization(tensors, o);
        REQUIRE(plan.tensors.size() == types.size());
        CHECK(plan.file_type == mix->file_type);
        for (size_t i = 0; i < types.size(); ++i) {
          INFO(m["name"].get<std::string>() << " " << mix_name << (imatrix ? " + imatrix " : " ")
                                            << plan.tensors[i].name
                                            << " (rule: " << plan.tensors[i].rule << ")");
          CHECK(std::string(ggml_type_name(plan.tensors[i].chosen)) ==
                types[i].get<std::string>());
          ++compared;
        }
      }
    }
  }
  // 4 models x 17 mixes x (without, with an importance matrix): the fixture really holds the
  // cases it claims
  CHECK(compared > 8000);
}

TEST_CASE("quant mix: the rules change types (the fixture is not all base types)", "[cpu]") {
  // Guards the comparison above against a fixture in which no rule ever fired.
  const nlohmann::json fx = fixture();
  const auto& m = fx["models"][0];
  const auto& q4km = m["mixes"]["Q4_K_M"];
  int q6 = 0, q4 = 0;
  for (const auto& t : q4km) {
    q6 += t.get<std::string>() == "Q6_K";
    q4 += t.get<std::string>() == "Q4_K";
  }
  CHECK(q6 > 8);
  CHECK(q4 > 8);
  // and the importance matrix changes some: Q4_0's first ffn_down layers become Q4_1
  int q41 = 0;
  for (const auto& t : m["mixes_imatrix"]["Q4_0"]) q41 += t.get<std::string>() == "Q4_1";
  CHECK(q41 == 2);  // 16 layers: the first eighth
}

// llama.cpp visits the tensors by layer number, then name, whatever the file's order (its
// loader keeps them so); real files are often sorted by name (SmolLM2: blk.0, blk.1, blk.10,
// ...), where counting in file order gives blk.10 the place of blk.2. The same tensors sorted
// by name and shuffled must get the fixture's types. (tools/check_quantize_llamacpp.py
// --requantize on the name-sorted SmolLM2 file checks this against llama.cpp itself.)
TEST_CASE("quant mix: the types do not depend on the order of the tensors in the file", "[cpu]") {
  const nlohmann::json fx = fixture();
  const auto& m = fx["models"][0];  // 16 layers: Q4_K_M's use_more_bits picks layers
  const std::vector<GgufTensorInfo> tensors = tensors_of(m);
  std::vector<GgufTensorInfo> by_name = tensors;
  std::sort(by_name.begin(), by_name.end(),
            [](const GgufTensorInfo& a, const GgufTensorInfo& b) { return a.name < b.name; });
  std::vector<GgufTensorInfo> shuffled = tensors;
  std::mt19937 rng(5);
  std::shuffle(shuffled.begin(), shuffled.end(), rng);
  int compared = 0;
  for (const auto* order : {&by_name, &shuffled}) {
    for (const bool imatrix : {false, true}) {
      for (const char* mix_name : {"Q4_K_M", "Q5_K_M", "Q4_0", "Q3_K_M"}) {
        const auto& types = m[imatrix ? "mixes_imatrix" : "mixes"][mix_name];
        std::map<std::string, std::string> expected;
        for (size_t i = 0; i < tensors.size(); ++i)
          expected[tensors[i].name] = types[i].get<std::string>();
        QuantOptions o;
        o.mix = find_quant_mix(mix_name);
        o.type = o.mix->base;
        o.model = model_of(m);
        o.has_imatrix = imatrix;
        for (const TensorPlan& p : plan_quantization(*order, o).tensors) {
          INFO(mix_name << (imatrix ? " + imatrix " : " ") << p.name);
          CHECK(std::string(ggml_type_name(p.chosen)) == expected.at(p.name));
          ++compared;
        }
      }
    }
  }
  CHECK(compared == 16 * static_cast<int>(tensors.size()));
}

TEST_CASE("quant mix: names, aliases, and every type of a plan is written", "[cpu]") {
  REQUIRE(find_quant_mix("q4_k_m") != nullptr);
  CHECK(std::string(find_quant_mix("Q4_K")->name) == "Q4_K_M");
  CHECK(std::string(find_quant_mix("q5_k")->name) == "Q5_K_M");
  CHECK(std::string(find_quant_mix("Q3_K")->name) == "Q3_K_M");
  CHECK(find_quant_mix("q4_k_m")->file_type == 15);
  CHECK(find_quant_mix("iq2_xxs") == nullptr);
  CHECK(find_quant_mix("q7") == nullptr);
  CHECK(quant_mix_names().find("Q4_K_M") != std::string::npos);

  const nlohmann::json fx = fixture();
  const auto& m = fx["models"][0];
  QuantOptions o;
  o.mix = find_quant_mix("Q3_K_M");
  o.type = o.mix->base;
  o.model = model_of(m);
  // Every type a mix picks is written (Q2_K, Q3_K, IQ4_NL, IQ4_XS included).
  for (const char* name : {"Q3_K_M", "Q2_K", "IQ4_XS", "IQ4_NL", "Q3_K_L"}) {
    INFO(name);
    o.mix = find_quant_mix(name);
    o.type = o.mix->base;
    CHECK(unwritable_types(plan_quantization(tensors_of(m), o)).empty());
  }

  o.mix = find_quant_mix("Q4_K_M");
  o.type = o.mix->base;
  CHECK(unwritable_types(plan_quantization(tensors_of(m), o)).empty());
}

TEST_CASE("quant mix: tensors llama.cpp never quantizes keep their type", "[cpu]") {
  CHECK(mix_allows_quantization("blk.0.attn_q.weight", {64, 64}));
  CHECK_FALSE(mix_allows_quantization("blk.0.attn_norm.weight", {64}));
  CHECK_FALSE(mix_allows_quantization("blk.0.attn_q.weight", {64, 1}));  // ggml_n_dims 1
  CHECK_FALSE(mix_allows_quantization("blk.0.ffn_gate_inp.weight", {64, 8}));
  CHECK_FALSE(mix_allows_quantization("blk.0.attn_q.bias", {64, 64}));
  GgufTensorInfo router;
  router.name = "blk.0.ffn_gate_inp.weight";
  router.shape = {256, 8};
  router.type = GgmlType::F16;
  router.n_bytes = 256 * 8 * 2;
  QuantOptions o;
  o.mix = find_quant_mix("Q4_K_M");
  o.type = o.mix->base;
  const QuantPlan p = plan_quantization({router}, o);
  CHECK(p.tensors[0].chosen == GgmlType::F16);
  CHECK(p.tensors[0].copy);
}
