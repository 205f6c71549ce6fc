// config.json -> ModelConfig (model/hf_config.h): the keys of each architecture, both
// transformers spellings of rope settings, the llama3 divisors against transformers, and
// every hostile value giving a FileError that names config.json and the key.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "model/hf_config.h"
#include "support/fixtures.h"
#include "support/test_data.h"

using namespace llmctl;
using Catch::Matchers::Contains;
using nlohmann::json;

namespace {

json llama() {
  return json::parse(R"({"architectures": ["LlamaForCausalLM"], "vocab_size": 32000,
    "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
    "num_key_value_heads": 8, "intermediate_size": 11008, "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": false,
    "hidden_act": "silu", "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "bfloat16"})");
}

HfConfig parse(const json& j) { return hf_config_from_json(j.dump(), "dir/config.json"); }

std::string error_of(const json& j) {
  try {
    parse(j);
  } catch (const FileError& e) {
    return e.what();
  }
  return "no error";
}

template <class F>
std::string error_with(F edit) {
  json j = llama();
  edit(j);
  return error_of(j);
}

}  // namespace

TEST_CASE("hf config: Llama keys and defaults", "[cpu]") {
  const HfConfig h = parse(llama());
  const ModelConfig& c = h.config;
  CHECK(h.architecture == "LlamaForCausalLM");
  CHECK(c.arch == "llama");
  CHECK(c.n_vocab == 32000);
  CHECK(c.n_embd == 4096);
  CHECK(c.n_layers == 32);
  CHECK(c.n_heads == 32);
  CHECK(c.n_kv_heads == 8);
  CHECK(c.head_dim == 128);
  CHECK(c.n_rot == 128);
  CHECK(c.n_ff == 11008);
  CHECK(c.n_ctx_train == 4096);
  CHECK(c.rms_eps == 1e-5f);
  CHECK(c.rope_freq_base == 10000.0);
  CHECK(c.rope_freq_scale == 1.0);
  CHECK(c.rope_type == RopeType::Neox);
  CHECK_FALSE(c.has_qkv_bias);
  CHECK_FALSE(h.tie_word_embeddings);
  CHECK(h.rope_freqs.empty());
  CHECK(h.bos_token_id == 1);
  CHECK(h.eos_token_id == 2);
  CHECK(h.torch_dtype == "bfloat16");

  json j = llama();
  j.erase("num_key_value_heads");
  j["head_dim"] = 256;  // explicit head_dim wins over hidden / heads (Gemma-style)
  j["eos_token_id"] = {128001, 128008, 128009};
  j["sliding_window"] = nullptr;  // null is absent
  const HfConfig h2 = parse(j);
  CHECK(h2.config.n_kv_heads == 32);
  CHECK(h2.config.head_dim == 256);
  CHECK(h2.config.q_dim() == 8192);
  CHECK(h2.eos_token_id == 128001);
}

TEST_CASE("hf config: Mistral and Qwen2", "[cpu]") {
  json m = llama();
  m["architectures"] = {"MistralForCausalLM"};
  m["max_position_embeddings"] = 32768;
  m["sliding_window"] = 4096;
  const HfConfig mh = parse(m);
  CHECK(mh.config.arch == "llama");
  CHECK(mh.config.n_ctx_train == 4096);  // exact only within the window

  json q = llama();
  q["architectures"] = {"Qwen2ForCausalLM"};
  q["tie_word_embeddings"] = true;
  q["use_sliding_window"] = false;
  q["rope_theta"] = 1000000.0;
  const HfConfig qh = parse(q);
  CHECK(qh.config.arch == "qwen2");
  CHECK(qh.config.has_qkv_bias);
  CHECK(qh.config.rope_type == RopeType::Neox);
  CHECK(qh.tie_word_embeddings);
  CHECK(qh.config.rope_freq_base == 1000000.0);
}

TEST_CASE("hf config: rope scaling, transformers v4 and v5 spellings", "[cpu]") {
  json v4 = llama();
  v4["rope_scaling"] = {{"type", "linear"}, {"factor", 4.0}};
  const HfConfig a = parse(v4);
  CHECK(a.config.rope_scaling_type == "linear");
  CHECK(a.config.rope_freq_scale == 0.25);

  json v5 = llama();
  v5.erase("rope_theta");
  v5["rope_parameters"] = {{"rope_type", "linear"}, {"factor", 2.0}, {"rope_theta", 500000.0}};
  const HfConfig b = parse(v5);
  CHECK(b.config.rope_freq_scale == 0.5);
  CHECK(b.config.rope_freq_base == 500000.0);

  json d = llama();
  d["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}};
  CHECK(parse(d).rope_scaling_type.empty());
  d["rope_parameters"]["partial_rotary_factor"] = 0.5;
  CHECK(parse(d).config.n_rot == 64);
}

TEST_CASE("hf config: llama3 rope divisors equal transformers' for a Llama 3.1 8B config",
          "[cpu][golden]") {
  const json golden =
      json::parse(llmctl::test::read_file(llmctl::test::fixture_path("hf_rope_llama3.json")));
  const HfConfig h = parse(golden["config"]);
  CHECK(h.rope_scaling_type == "llama3");
  CHECK(h.config.rope_freq_scale == 1.0);  // llama3 scales through the divisors only
  CHECK(h.config.rope_scaling_type.empty());
  const auto expected = golden["rope_freqs"].get<std::vector<double>>();
  REQUIRE(h.rope_freqs.size() == expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    INFO("pair " << i);
    CHECK(static_cast<double>(h.rope_freqs[i]) == Approx(expected[i]).epsilon(1e-6));
  }
}

TEST_CASE("hf config: hostile values name config.json and the key", "[cpu]") {
  CHECK_THAT(error_with([](json& j) { j.erase("hidden_size"); }),
             Contains("dir/config.json: 'hidden_size' is missing"));
  CHECK_THAT(error_with([](json& j) { j["hidden_size"] = "64"; }),
             Contains("'hidden_size' is \"64\", expected an integer"));
  CHECK_THAT(error_with([](json& j) { j["hidden_size"] = 64.5; }),
             Contains("'hidden_size' is 64.5, expected an integer"));
  CHECK_THAT(error_with([](json& j) { j["hidden_size"] = 1 << 30; }),
             Contains("'hidden_size' = 1073741824 is outside [1, 16777216]"));
  CHECK_THAT(error_with([](json& j) { j["hidden_size"] = UINT64_MAX; }),
             Contains("'hidden_size' = 18446744073709551615 is outside"));
  CHECK_THAT(error_with([](json& j) { j["num_hidden_layers"] = -1; }),
             Contains("'num_hidden_layers' = -1 is outside [1, 4096]"));
  CHECK_THAT(error_with([](json& j) { j["vocab_size"] = 0; }),
             Contains("'vocab_size' = 0 is outside"));
  CHECK_THAT(error_with([](json& j) { j["num_key_value_heads"] = 3; }),
             Contains("'num_key_value_heads' = 3 does not divide num_attention_heads = 32"));
  CHECK_THAT(error_with([](json& j) {
               j["num_attention_heads"] = 24;
               j["num_key_value_heads"] = 8;
             }),
             Contains("'num_attention_heads' = 24 does not divide hidden_size = 4096"));
  CHECK_THAT(error_with([](json& j) { j["rms_norm_eps"] = 0; }),
             Contains("'rms_norm_eps' = 0 is outside (0, 1]"));
  CHECK_THAT(error_with([](json& j) { j["rope_theta"] = -5; }),
             Contains("'rope_theta' = -5 is outside (1, 1000000000000]"));
  CHECK_THAT(error_with([](json& j) { j["tie_word_embeddings"] = "yes"; }),
             Contains("'tie_word_embeddings' is \"yes\", expected true or false"));
  CHECK_THAT(error_with([](json& j) { j["hidden_act"] = "gelu"; }),
             Contains("'hidden_act' 'gelu' is not supported (supported: silu)"));
  CHECK_THAT(error_with([](json& j) { j["attention_bias"] = true; }),
             Contains("'attention_bias' = true is not supported"));
  CHECK_THAT(error_with([](json& j) {
               j["architectures"] = {"Qwen2ForCausalLM"};
               j["use_sliding_window"] = true;
             }),
             Contains("'use_sliding_window' = true is not supported"));
  CHECK_THAT(error_with([](json& j) { j["architectures"] = {"GemmaForCausalLM"}; }),
             Contains("architecture 'GemmaForCausalLM' is not supported (supported: "
                      "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, "
                      "Olmo2ForCausalLM, Gemma2ForCausalLM, Gemma3ForCausalLM, "
                      "Ministral3ForCausalLM, GraniteForCausalLM, Phi3ForCausalLM)"));
  CHECK_THAT(error_with([](json& j) { j.erase("architectures"); }),
             Contains("'architectures' is missing or not a list of names"));
  CHECK_THAT(error_with([](json& j) {
               j["rope_scaling"] = {{"type", "dynamic"}, {"factor", 4.0}};
             }),
             Contains("'rope_scaling.type' 'dynamic' is not supported (supported: default, "
                      "linear, llama3, yarn, longrope)"));
  // longrope's factor lists are required (Phi3Config validates them too).
  CHECK_THAT(error_with([](json& j) {
               j["rope_scaling"] = {{"type", "longrope"}, {"factor", 4.0}};
             }),
             Contains("'rope_scaling.long_factor' is missing"));
  CHECK_THAT(error_with([](json& j) {
               j["rope_parameters"] = {{"rope_type", "dynamic"}};
             }),
             Contains("'rope_parameters.rope_type' 'dynamic' is not supported"));
  CHECK_THAT(error_with([](json& j) {
               j["rope_scaling"] = {{"type", "linear"}, {"factor", 0.5}};
             }),
             Contains("'rope_scaling.factor' = 0.5 is outside [1, 1000000]"));
  CHECK_THAT(error_with([](json& j) { j["rope_scaling"] = "linear"; }),
             Contains("'rope_scaling' is not a JSON object"));
  CHECK_THAT(error_with([](json& j) {
               j["rope_scaling"] = {{"rope_type", "llama3"},
                                    {"factor", 8.0},
                                    {"low_freq_factor", 4.0},
                                    {"high_freq_factor", 1.0}};
             }),
             Contains("'rope_scaling.high_freq_factor' = 1 must exceed low_freq_factor = 4"));
  CHECK_THAT(error_with([](json& j) { j["eos_token_id"] = json::array(); }),
             Contains("'eos_token_id' is [], expected a token id"));
  CHECK_THAT(error_of(json::array()), Contains("dir/config.json: expected a JSON object"));
  try {
    hf_config_from_json("{\"vocab_size\": ", "dir/config.json");
    FAIL("no error");
  } catch (const FileError& e) {
    CHECK_THAT(e.what(), Contains("dir/config.json: not valid JSON"));
  }
}
