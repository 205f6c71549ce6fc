// kvplan model shapes: the catalog against published parameter totals, head_dim taken from the
// configuration, and shapes read from GGUF metadata and Hugging Face config.json files.
#include <catch2/catch.hpp>

#include <set>

#include "core/error.h"
#include "io/gguf.h"
#include "io/gguf_format.h"
#include "io/gguf_writer.h"
#include "plan/gpu_catalog.h"
#include "cli/kvplan_model.h"
#include "plan/model_config.h"
#include "support/test_data.h"

using namespace llmctl;
using namespace llmctl::plan;

namespace {

std::string write_json(const std::string& name, const std::string& text) {
  const std::string path = test::temp_dir() + "/" + name;
  test::write_file(path, text);
  return path;
}

}  // namespace

TEST_CASE("catalog: at least 25 architectures with unique names", "[cpu][plan]") {
  std::set<std::string> names;
  for (const ModelConfig& m : model_catalog()) {
    CHECK(names.insert(m.name).second);
    CHECK(!m.source.empty());
    CHECK(m.n_heads % m.n_kv_heads == 0);
  }
  CHECK(names.size() >= 25);
  for (const char* n : {"llama-2-7b", "llama-2-13b", "llama-2-70b", "llama-3-8b", "llama-3-70b", "llama-3.1-8b",
                        "llama-3.1-70b", "llama-3.1-405b", "llama-3.2-1b", "llama-3.2-3b", "mistral-7b",
                        "mixtral-8x7b", "mixtral-8x22b", "qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-7b", "qwen2.5-14b",
                        "qwen2.5-32b", "qwen2.5-72b", "qwen3-8b", "qwen3-14b", "qwen3-32b", "qwen3-30b-a3b",
                        "qwen3-235b-a22b", "gemma-2-9b", "gemma-2-27b", "phi-3-mini", "deepseek-v2-lite",
                        "deepseek-v3", "tinyllama-1.1b", "gpt-oss-20b", "gpt-oss-120b"})
    CHECK(names.count(n) == 1);
}

// Totals as published on the model cards / Hugging Face (safetensors parameter counts).
TEST_CASE("catalog: parameter counts from the shapes match published totals within 1%", "[cpu][plan][golden]") {
  const std::pair<const char*, double> published[] = {
      {"llama-2-7b", 6.74e9},      {"llama-2-13b", 13.02e9},    {"llama-2-70b", 68.98e9},
      {"llama-3-8b", 8.03e9},      {"llama-3-70b", 70.55e9},    {"llama-3.1-8b", 8.03e9},
      {"llama-3.1-70b", 70.55e9},  {"llama-3.1-405b", 405.85e9}, {"llama-3.2-1b", 1.24e9},
      {"llama-3.2-3b", 3.21e9},    {"mistral-7b", 7.24e9},      {"mixtral-8x7b", 46.7e9},
      {"mixtral-8x22b", 140.6e9},  {"qwen2.5-0.5b", 0.494e9},   {"qwen2.5-1.5b", 1.54e9},
      {"qwen2.5-7b", 7.61e9},      {"qwen2.5-14b", 14.7e9},     {"qwen2.5-32b", 32.5e9},
      {"qwen2.5-72b", 72.7e9},     {"qwen3-8b", 8.2e9},         {"qwen3-14b", 14.8e9},
      {"qwen3-32b", 32.8e9},       {"qwen3-30b-a3b", 30.5e9},   {"qwen3-235b-a22b", 235e9},
      {"gemma-2-9b", 9.24e9},      {"gemma-2-27b", 27.2e9},     {"phi-3-mini", 3.82e9},
      {"deepseek-v2-lite", 15.7e9}, {"deepseek-v3", 671e9},     {"tinyllama-1.1b", 1.1e9},
      {"gpt-oss-20b", 21e9},       {"gpt-oss-120b", 117e9},
  };
  for (const auto& [name, total] : published) {
    INFO(name);
    const double counted = static_cast<double>(count_params(find_model(name)).total());
    CHECK(counted == Approx(total).epsilon(0.01));
  }
  // Exact totals of the safetensors checkpoints.
  CHECK(count_params(find_model("llama-3.1-8b")).total() == 8030261248);
  CHECK(count_params(find_model("llama-2-7b")).total() == 6738415616);
  CHECK(count_params(find_model("mistral-7b")).total() == 7241732096);
  CHECK(count_params(find_model("mixtral-8x7b")).total() == 46702792704);
}

TEST_CASE("catalog: MoE active parameters match the published activated counts", "[cpu][plan][golden]") {
  const std::pair<const char*, double> active[] = {
      {"mixtral-8x7b", 12.9e9}, {"mixtral-8x22b", 39e9},     {"qwen3-30b-a3b", 3.3e9},
      {"qwen3-235b-a22b", 22e9}, {"deepseek-v2-lite", 2.4e9}, {"deepseek-v3", 37e9},
      {"gpt-oss-20b", 3.6e9},    {"gpt-oss-120b", 5.1e9}};
  for (const auto& [name, published] : active) {
    INFO(name);
    // Published "activated" counts differ on whether the embedding and lm_head are in: 10%.
    CHECK(static_cast<double>(count_params(find_model(name)).active_matmul) == Approx(published).epsilon(0.10));
  }
}

TEST_CASE("catalog: head_dim comes from the configuration, not hidden / heads", "[cpu][plan]") {
  CHECK(find_model("qwen3-32b").head_dim == 128);    // 5120 / 64 would be 80
  CHECK(find_model("gemma-2-9b").head_dim == 256);   // 3584 / 16 would be 224
  CHECK(find_model("gemma-2-27b").head_dim == 128);  // 4608 / 32 would be 144
  CHECK(find_model("llama-3.2-1b").head_dim == 64);
  const ModelConfig g = find_model("gemma-2-9b");
  CHECK(g.layer_window(0) == 4096);  // even layers slide
  CHECK(g.layer_window(1) == 0);     // odd layers are global
  CHECK(find_model("mistral-7b").layer_window(31) == 4096);
  CHECK(find_model("llama-3.1-8b").layer_window(0) == 0);
}

TEST_CASE("catalog: names are matched leniently and unknown names list close ones", "[cpu][plan]") {
  CHECK(find_model("meta-llama/Llama-3.1-8B-Instruct").name == "llama-3.1-8b");
  CHECK(find_model("Meta-Llama-3-8B").name == "llama-3-8b");
  CHECK(find_model("Qwen/Qwen3-30B-A3B").name == "qwen3-30b-a3b");
  try {
    find_model("llama-3.1-8");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("llama-3.1-8b") != std::string::npos);
  }
}

TEST_CASE("config.json: a Qwen3 config with explicit head_dim", "[cpu][plan]") {
  const std::string path = write_json("qwen3.json", R"({
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 5120,
    "intermediate_size": 25600, "num_hidden_layers": 64, "num_attention_heads": 64,
    "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936, "tie_word_embeddings": false,
    "max_position_embeddings": 40960, "sliding_window": null, "use_sliding_window": false})");
  const ModelConfig c = cli::kvplan_model_from_config_json(path);
  CHECK(c.head_dim == 128);
  CHECK(c.n_kv_heads == 8);
  CHECK(c.sliding_window == 0);
  CHECK(c.qk_norm);
  CHECK(count_params(c).total() == count_params(find_model("qwen3-32b")).total());
}

TEST_CASE("config.json: Mixtral, DeepSeek MLA and Gemma-2 configs", "[cpu][plan]") {
  const ModelConfig mx = cli::kvplan_model_from_config_json(write_json("mixtral.json", R"({
    "model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "num_local_experts": 8, "num_experts_per_tok": 2,
    "vocab_size": 32000, "max_position_embeddings": 32768, "sliding_window": null})"));
  CHECK(mx.n_experts == 8);
  CHECK(mx.n_ff_expert == 14336);
  CHECK(count_params(mx).total() == 46702792704);

  const ModelConfig ds = cli::kvplan_model_from_config_json(write_json("dsv3.json", R"({
    "model_type": "deepseek_v3", "hidden_size": 7168, "intermediate_size": 18432, "moe_intermediate_size": 2048,
    "num_hidden_layers": 61, "num_attention_heads": 128, "num_key_value_heads": 128, "n_routed_experts": 256,
    "n_shared_experts": 1, "num_experts_per_tok": 8, "first_k_dense_replace": 3, "q_lora_rank": 1536,
    "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
    "vocab_size": 129280, "max_position_embeddings": 163840, "tie_word_embeddings": false})"));
  CHECK(ds.is_mla());
  CHECK(ds.kv_lora_rank == 512);
  CHECK(ds.n_dense_layers == 3);
  CHECK(static_cast<double>(count_params(ds).total()) == Approx(671e9).epsilon(0.01));

  const ModelConfig g = cli::kvplan_model_from_config_json(write_json("gemma2.json", R"({
    "model_type": "gemma2", "hidden_size": 3584, "intermediate_size": 14336, "num_hidden_layers": 42,
    "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 256, "sliding_window": 4096,
    "vocab_size": 256000, "max_position_embeddings": 8192})"));
  CHECK(g.tied_embeddings);
  CHECK(g.layer_window(0) == 4096);
  CHECK(g.layer_window(1) == 0);
  CHECK(static_cast<double>(count_params(g).total()) == Approx(9.24e9).epsilon(0.01));
}

TEST_CASE("config.json: a missing field is a FileError naming it", "[cpu][plan]") {
  const std::string path = write_json("broken.json", R"({"model_type": "llama", "hidden_size": 4096,
    "num_hidden_layers": 32, "vocab_size": 32000, "intermediate_size": 11008})");
  try {
    cli::kvplan_model_from_config_json(path);
    FAIL("no error");
  } catch (const FileError& e) {
    CHECK(std::string(e.what()).find("num_attention_heads") != std::string::npos);
    CHECK(e.path() == path);
  }
  CHECK_THROWS_AS(cli::kvplan_model_from_config_json(write_json("notjson.json", "{ nope")), FileError);
}

TEST_CASE("GGUF: stories260K's shape from metadata and counted parameters equal the tensor table", "[cpu][plan]") {
  const std::string file = test::require_test_file("models/stories260K.gguf");
  const GgufFile f = GgufFile::open(file);
  const ModelConfig c = cli::kvplan_model_from_gguf(f);
  CHECK(c.n_layers == 5);
  CHECK(c.n_embd == 64);
  CHECK(c.n_heads == 8);
  CHECK(c.n_kv_heads == 4);
  CHECK(c.head_dim == 8);
  CHECK(c.n_vocab == 512);
  CHECK(c.max_ctx == 2048);
  CHECK(count_params(c).total() == gguf_parameter_count(f));  // 292,800 from the tensor shapes
  CHECK(c.file_weight_bytes == 1171200);
}

TEST_CASE("GGUF: MoE and MLA keys", "[cpu][plan]") {
  using namespace llmctl::gguf_value;
  GgufBuilder b;
  b.set("general.architecture", string("deepseek2"));
  b.set("deepseek2.block_count", u32(27));
  b.set("deepseek2.embedding_length", u32(2048));
  b.set("deepseek2.feed_forward_length", u32(10944));
  b.set("deepseek2.attention.head_count", u32(16));
  b.set("deepseek2.attention.head_count_kv", u32(16));
  b.set("deepseek2.attention.key_length", u32(192));
  b.set("deepseek2.attention.value_length", u32(128));
  b.set("deepseek2.attention.kv_lora_rank", u32(512));
  b.set("deepseek2.rope.dimension_count", u32(64));
  b.set("deepseek2.expert_count", u32(64));
  b.set("deepseek2.expert_used_count", u32(6));
  b.set("deepseek2.expert_shared_count", u32(2));
  b.set("deepseek2.expert_feed_forward_length", u32(1408));
  b.set("deepseek2.leading_dense_block_count", u32(1));
  b.set("deepseek2.vocab_size", u32(102400));
  b.add_tensor("output.weight", GgmlType::F32, {2, 2}, std::vector<uint8_t>(16));
  const auto bytes = std::make_shared<const std::vector<uint8_t>>(b.build());
  const ModelConfig c = cli::kvplan_model_from_gguf(GgufFile::from_memory(bytes, "lite.gguf"));
  CHECK(c.is_mla());
  CHECK(c.qk_rope_dim == 64);
  CHECK(c.qk_nope_dim == 128);
  CHECK(c.v_dim() == 128);
  CHECK(count_params(c).total() == count_params(find_model("deepseek-v2-lite")).total());

  GgufBuilder bad;
  bad.set("general.architecture", string("llama"));
  bad.set("llama.block_count", u32(2));
  const auto bad_bytes = std::make_shared<const std::vector<uint8_t>>(bad.build());
  try {
    cli::kvplan_model_from_gguf(GgufFile::from_memory(bad_bytes, "bad.gguf"));
    FAIL("no error");
  } catch (const FileError& e) {
    CHECK(std::string(e.what()).find("llama.embedding_length") != std::string::npos);
  }
}

TEST_CASE("GPU catalog: the issue's 15+ GPUs with usable, not marketed, memory", "[cpu][plan]") {
  CHECK(gpu_catalog().size() >= 15);
  for (const char* n : {"t4", "v100-16g", "v100-32g", "a10", "a10g", "l4", "l40s", "a100-40g-pcie", "a100-40g-sxm",
                        "a100-80g-pcie", "a100-80g-sxm", "h100-pcie", "h100-sxm", "h200", "b200", "rtx-3090",
                        "rtx-4090", "rtx-5090"}) {
    INFO(n);
    const GpuSpec g = find_gpu(n);
    CHECK(g.bandwidth_gbs > 0);
    CHECK(g.tflops_16 > 0);
    CHECK(!g.source.empty());
    // CUDA never offers the whole marketed size.
    CHECK(static_cast<double>(g.usable_bytes) < g.marketed_gb * 1024.0 * 1024 * 1024);
  }
  // vLLM logs: an H100 80GB reports 79.19 GiB total.
  CHECK(static_cast<double>(find_gpu("H100").usable_bytes) / (1024.0 * 1024 * 1024) == Approx(79.19).margin(0.005));
  CHECK(find_gpu("h100-sxm").tflops_8 > 0);
  CHECK(find_gpu("a100-80g-sxm").tflops_8 == 0);  // Ampere has no FP8
  try {
    find_gpu("h10");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("h100-sxm") != std::string::npos);
  }
}
