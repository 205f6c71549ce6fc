// kvplan's planning input from the engine's readers (cli/kvplan_model.h): on the shared models
// and on every tests/fixtures/family_* GGUF and config.json, kvplan's numbers are the engine's
// (config_from_gguf, read_hf_config: counts, head sizes, context, biases, QK-norm, and the
// window of every layer), and a bad file gets the engine's message.
#include <catch2/catch.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "cli/kvplan_model.h"
#include "core/error.h"
#include "core/sliding_window.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "model/config.h"
#include "model/hf_config.h"
#include "support/fixtures.h"
#include "support/test_data.h"

using namespace llmctl;

namespace {

void check_agrees(const ModelConfig& engine, const plan::ModelConfig& kv) {
  CHECK(kv.arch == engine.arch);
  CHECK(kv.n_layers == engine.n_layers);
  CHECK(kv.n_embd == engine.n_embd);
  CHECK(kv.n_heads == engine.n_heads);
  CHECK(kv.n_kv_heads == engine.n_kv_heads);
  CHECK(kv.head_dim == engine.head_dim);
  CHECK(kv.v_dim() == engine.head_dim);
  CHECK(kv.n_ff == engine.n_ff);
  CHECK(kv.n_vocab == engine.n_vocab);
  CHECK(kv.max_ctx == engine.n_ctx_train);
  CHECK(kv.qkv_bias == engine.has_qkv_bias);
  CHECK(kv.qk_norm == (engine.qk_norm != QkNorm::None));
  CHECK_FALSE(kv.is_moe());
  CHECK_FALSE(kv.is_mla());
  for (int64_t l = 0; l < engine.n_layers; ++l) {
    INFO("layer " << l);
    const int64_t window = engine.sliding_window > 0 && window_pattern_has(engine.window, l)
                               ? engine.sliding_window
                               : 0;
    CHECK(kv.layer_window(l) == window);
  }
}

// The message of the FileError `read` throws ("" when it throws none).
template <class Read>
std::string file_error_of(Read&& read) {
  try {
    read();
  } catch (const FileError& e) {
    return e.what();
  }
  return {};
}

void check_gguf_agrees(const std::string& path) {
  INFO(path);
  const GgufFile f = GgufFile::open(path);
  check_agrees(config_from_gguf(f), cli::kvplan_model_from_gguf(f));
}

}  // namespace

TEST_CASE("kvplan's GGUF input equals the engine's config on the shared models", "[cpu][plan]") {
  for (const char* rel : {"models/stories260K.gguf", "models/SmolLM2-135M-Instruct.Q4_1.gguf"})
    check_gguf_agrees(test::require_test_file(rel));
}

TEST_CASE("kvplan's GGUF input equals the engine's config on every family fixture", "[cpu][plan]") {
  for (const char* family :
       {"gemma2", "granite", "olmo2", "phi3", "phi3_longrope", "phi3_partial", "qwen3"})
    check_gguf_agrees(test::fixture_path(std::string("family_") + family + "/model.gguf"));
}

TEST_CASE("kvplan's GGUF input: the experts of every MoE fixture, parameters as the file's",
          "[cpu][plan]") {
  for (const char* family : {"mixtral", "qwen2moe", "qwen3moe"}) {
    INFO(family);
    const GgufFile f = GgufFile::open(test::fixture_path(std::string("family_moe_") + family +
                                                         "/model.gguf"));
    const ModelConfig engine = config_from_gguf(f);
    const plan::ModelConfig kv = cli::kvplan_model_from_gguf(f);
    CHECK(kv.n_experts == engine.n_experts);
    CHECK(kv.n_experts_used == engine.n_experts_used);
    CHECK(kv.n_ff_expert == engine.n_ff_expert);
    CHECK(kv.n_ff_shared == engine.n_ff_shared);
    // Every matrix and vector of the file, the shared expert and its gate included (Qwen2-MoE).
    CHECK(plan::count_params(kv).total() == kv.file_params);
  }
}

TEST_CASE("kvplan's config.json input equals the engine's on every family fixture", "[cpu][plan]") {
  for (const char* family :
       {"gemma2", "granite", "olmo2", "phi3", "phi3_longrope", "phi3_partial", "qwen3"}) {
    const std::string path = test::fixture_path(std::string("family_") + family + "/config.json");
    INFO(path);
    const HfConfig engine = read_hf_config(path);
    const plan::ModelConfig kv = cli::kvplan_model_from_config_json(path);
    CHECK(kv.tied_embeddings == engine.tie_word_embeddings);
    check_agrees(engine.config, kv);
  }
}

TEST_CASE("kvplan reports a bad GGUF with the engine's message", "[cpu][plan]") {
  using namespace llmctl::gguf_value;
  // head_count_kv 3 does not divide head_count 8; then a key out of range.
  for (const auto& [key, value, want] :
       {std::tuple<const char*, uint32_t, const char*>{"llama.attention.head_count_kv", 3,
                                                       "does not divide head_count = 8"},
        {"llama.block_count", 5000, "'llama.block_count' = 5000 is outside [1, 4096]"}}) {
    GgufBuilder b;
    b.set("general.architecture", string("llama"));
    b.set("llama.embedding_length", u32(64));
    b.set("llama.block_count", u32(2));
    b.set("llama.attention.head_count", u32(8));
    b.set("llama.feed_forward_length", u32(128));
    b.set("llama.context_length", u32(256));
    b.set(key, u32(value));
    b.add_tensor("token_embd.weight", GgmlType::F32, {64, 4}, std::vector<uint8_t>(64 * 4 * 4));
    const auto bytes = std::make_shared<const std::vector<uint8_t>>(b.build());
    const GgufFile f = GgufFile::from_memory(bytes, "bad.gguf");
    const std::string engine_message = file_error_of([&] { (void)config_from_gguf(f); });
    const std::string kvplan_message = file_error_of([&] { (void)cli::kvplan_model_from_gguf(f); });
    INFO(key);
    CHECK(engine_message.find(want) != std::string::npos);
    CHECK(kvplan_message == engine_message);
  }
}

TEST_CASE("kvplan reports a bad config.json with the engine's message", "[cpu][plan]") {
  for (const auto& [key, value, want] :
       {std::tuple<const char*, nlohmann::json, const char*>{
            "num_key_value_heads", 3, "'num_key_value_heads' = 3 does not divide"},
        {"num_hidden_layers", 5000, "'num_hidden_layers' = 5000 is outside [1, 4096]"},
        {"vocab_size", "many", "'vocab_size' is \"many\", expected an integer"}}) {
    nlohmann::json j = {{"architectures", {"LlamaForCausalLM"}},
                        {"model_type", "llama"},
                        {"hidden_size", 64},
                        {"num_hidden_layers", 2},
                        {"num_attention_heads", 8},
                        {"intermediate_size", 128},
                        {"vocab_size", 32},
                        {"max_position_embeddings", 256}};
    j[key] = value;
    const std::string path = test::temp_dir() + "/kvplan_bad_config.json";
    test::write_file(path, j.dump());
    const std::string engine_message = file_error_of([&] { (void)read_hf_config(path); });
    const std::string kvplan_message =
        file_error_of([&] { (void)cli::kvplan_model_from_config_json(path); });
    INFO(key);
    CHECK(engine_message.find(want) != std::string::npos);
    CHECK(kvplan_message == engine_message);
  }
}
