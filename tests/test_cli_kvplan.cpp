// `llmctl kvplan` as users and scripts call it.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "support/run_cli.h"
#include "support/test_data.h"

using llmctl::test::require_test_file;
using llmctl::test::run_llmctl;

namespace {

bool has(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

size_t count_lines(const std::string& s) { return static_cast<size_t>(std::count(s.begin(), s.end(), '\n')); }

}  // namespace

TEST_CASE("kvplan answers the README question in one command", "[cli][plan]") {
  // Does Llama-3.1-70B in FP8 fit on two H100s at 32k context with 16 users?
  const auto r = run_llmctl({"kvplan", "--model", "llama-3.1-70b", "--weight-type", "fp8", "--gpu", "h100-sxm",
                             "--gpus", "2", "--ctx", "32768", "--batch", "16"});
  REQUIRE(r.code == 0);
  CHECK(has(r.out, "does not fit by"));
  CHECK(has(r.out, "largest lever"));
  CHECK(has(r.out, "sweep"));
  CHECK(has(r.out, "327680 B whole model, 163840 B per GPU"));
}

TEST_CASE("kvplan --json has the stable keys", "[cli][plan]") {
  const auto r = run_llmctl({"kvplan", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--engine", "vllm",
                             "--gpu-util", "0.95", "--ctx", "8192", "--kv-budget", "58.11", "--json"});
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  for (const char* key : {"weights_bytes", "kv_bytes_per_token", "kv_blocks", "kv_tokens", "max_concurrency",
                          "max_context", "decode_tok_s", "prefill_s", "fits"})
    CHECK(j.contains(key));
  CHECK(j["kv_bytes_per_token"] == 131072);
  CHECK(std::abs(j["kv_blocks"].get<int64_t>() - 29751) <= 1);
  CHECK(j["max_concurrency"] == 58);
  CHECK(j["fits"] == true);
  CHECK(j["sweep"].size() >= 10);
}

TEST_CASE("kvplan reads a GGUF file's metadata", "[cli][plan]") {
  const std::string model = require_test_file("models/stories260K.gguf");
  const auto r = run_llmctl({"kvplan", "--model", model, "--gpu", "t4", "--json", "--no-sweep"});
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["kv_bytes_per_token"] == 5 * 2 * 4 * 8 * 2);  // 5 layers, 4 KV heads of 8, f16
  CHECK(j["weights_bytes"] == 1171200);                  // the file's tensor bytes
  CHECK(j["ctx"] == 2048);                                // the model's context length
  CHECK(j["fits"] == true);
  const auto t = run_llmctl({"kvplan", "--model", model, "--gpu", "t4"});
  REQUIRE(t.code == 0);
  CHECK(has(t.out, "verdict          fits"));
  CHECK(has(t.out, "from metadata only"));
}

TEST_CASE("kvplan --explain shows the formula and corrects published errors", "[cli][plan]") {
  const auto r = run_llmctl({"kvplan", "--model", "llama-3-8b", "--weight-type", "f16", "--ctx", "4096",
                             "--no-sweep", "--explain"});
  REQUIRE(r.code == 0);
  CHECK(has(r.out, "2 (K and V) x 32 layers x 8 KV heads x 128 head_dim x 2 bytes (f16) = 131,072 B"));
  CHECK(has(r.out, "0.50 GiB"));
  CHECK(has(r.out, "not the 32 attention heads"));
  CHECK(has(r.out, "2.00 GiB (2.15 GB)"));  // the article's "2.1 GB"
  CHECK(has(r.out, "14.96 GiB"));
  CHECK(has(r.out, "quadratic"));
  const auto m = run_llmctl({"kvplan", "--model", "deepseek-v3", "--gpu", "h200", "--gpus", "8", "--no-sweep",
                             "--explain"});
  REQUIRE(m.code == 0);
  CHECK(has(m.out, "kv_lora_rank 512 + qk_rope_head_dim 64"));
}

TEST_CASE("kvplan engines, custom GPUs and the SVG chart", "[cli][plan]") {
  auto r = run_llmctl({"kvplan", "--model", "mistral-7b", "--engine", "llamacpp", "--ctx", "2048", "--gpu",
                       "rtx-4090", "--weight-type", "q4_0", "--json", "--no-sweep"});
  REQUIRE(r.code == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["kv_bytes_needed"] == 256 * 1024 * 1024);
  CHECK(j["block_size"] == 256);
  r = run_llmctl({"kvplan", "--model", "llama-3-8b", "--gpu-mem", "79.22", "--bandwidth", "3350", "--tflops",
                  "989", "--engine", "vllm", "--activation", "1.26", "--non-torch", "1.79", "--json", "--no-sweep"});
  REQUIRE(r.code == 0);
  j = nlohmann::json::parse(r.out);
  CHECK(j["kv_budget_bytes"].get<double>() / (1024.0 * 1024 * 1024) == Approx(53.29).margin(0.015));
  const std::string svg = llmctl::test::temp_dir() + "/mem.svg";
  r = run_llmctl({"kvplan", "--model", "qwen3-8b", "--gpu", "l40s", "--batch", "8", "--svg", svg, "--no-sweep"});
  REQUIRE(r.code == 0);
  const std::string text = llmctl::test::read_file(svg);
  CHECK(text.rfind("<svg", 0) == 0);
  CHECK(has(text, "polyline"));
  CHECK(has(text, "</svg>"));
}

TEST_CASE("kvplan lists its catalogs", "[cli][plan]") {
  auto r = run_llmctl({"kvplan", "--list-models"});
  REQUIRE(r.code == 0);
  CHECK(count_lines(r.out) >= 26);
  r = run_llmctl({"kvplan", "--list-gpus"});
  REQUIRE(r.code == 0);
  CHECK(count_lines(r.out) >= 16);
  CHECK(has(r.out, "79.19"));
}

TEST_CASE("kvplan errors: unknown names exit 1 with close names, bad numbers exit 2", "[cli][plan]") {
  auto r = run_llmctl({"kvplan", "--model", "llama-3.1-8", "--gpu", "h100-sxm"});
  CHECK(r.code == 1);
  CHECK(has(r.err, "llama-3.1-8b"));
  r = run_llmctl({"kvplan", "--model", "llama-3.1-8b", "--gpu", "h10"});
  CHECK(r.code == 1);
  CHECK(has(r.err, "h100"));
  CHECK(run_llmctl({"kvplan", "--model", "llama-3.1-8b", "--ctx", "0"}).code == 2);
  CHECK(run_llmctl({"kvplan", "--model", "llama-3.1-8b", "--gpu-util", "1.5"}).code == 2);
  CHECK(run_llmctl({"kvplan", "--model", "llama-3.1-8b", "--gpu-util", "0"}).code == 2);
  CHECK(run_llmctl({"kvplan", "--model", "llama-3.1-8b", "--gpus", "3"}).code == 2);  // 32 heads
  CHECK(run_llmctl({"kvplan", "--model", "llama-3.1-8b", "--gpus", "4", "--tp", "3"}).code == 2);
  CHECK(run_llmctl({"kvplan", "--gpu", "h100"}).code == 2);  // no model
  CHECK(run_llmctl({"kvplan", "--model", "llama-3.1-8b", "--gpu-mem", "80"}).code == 2);
  CHECK(run_llmctl({"kvplan", "--model", "llama-3.1-8b", "--kv-type", "q9"}).code == 2);
  r = run_llmctl({"kvplan", "--model", "/nonexistent/model.gguf"});
  CHECK(r.code == 1);
  CHECK(has(r.err, "no such file"));
  const std::string cfg = llmctl::test::temp_dir() + "/config.json";
  llmctl::test::write_file(cfg, R"({"hidden_size": 4096, "num_hidden_layers": 32, "vocab_size": 32000})");
  r = run_llmctl({"kvplan", "--model", cfg});
  CHECK(r.code == 1);
  CHECK(has(r.err, "num_attention_heads"));
}

TEST_CASE("kvplan --measure allocates the plan on the CPU", "[cli][plan]") {
  const std::string model = require_test_file("models/stories260K.gguf");
  const auto r = run_llmctl({"kvplan", "--model", model, "--ctx", "2048", "--batch", "16", "--measure", "--json"});
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  const auto kv_pred = j["kv_predicted_bytes"].get<double>();
  CHECK(kv_pred == 16.0 * 2048 * 640);
  // Resident-set growth: whole pages per buffer (10 buffers), allow 1% and a few pages.
  CHECK(j["kv_measured_bytes"].get<double>() == Approx(kv_pred).margin(kv_pred * 0.01 + 16 * 4096));
  const auto w_pred = j["weights_predicted_bytes"].get<double>();
  CHECK(j["weights_measured_bytes"].get<double>() == Approx(w_pred).margin(w_pred * 0.01 + 16 * 4096));
  const auto big = run_llmctl({"kvplan", "--model", "llama-3.1-405b", "--measure"});
  CHECK(big.code == 1);
  CHECK(has(big.err, "host memory"));
}

// The real Gemma 3 270M (18 layers, 15 of them windowed over 512 positions, 1 KV head of 256):
// the pattern comes from the architecture table, the file carries only the window.
TEST_CASE("kvplan on the real Gemma 3 file counts the windowed layers as each engine does",
          "[cli][plan]") {
  const std::string model = llmctl::test::require_fetched_model("gemma-3-270m-q4_k_m.gguf");
  const auto kv_bytes = [&](const char* engine) {
    const auto r = run_llmctl(
        {"kvplan", "--model", model, "--engine", engine, "--ctx", "32768", "--json", "--no-sweep"});
    REQUIRE(r.code == 0);
    return nlohmann::json::parse(r.out)["kv_bytes_per_seq"].get<uint64_t>();
  };
  constexpr uint64_t kCell = 2 * 256 * 2;  // K and V of one head of 256, f16
  // llama.cpp's log: 3 layers x 32768 cells + 15 windowed layers x 1024 cells = 111 MiB.
  CHECK(kv_bytes("llamacpp") == (3 * 32768 + 15 * 1024) * kCell);
  // llmctl: 65 blocks of 16 per windowed layer (window 512 + batch 512), as llmctl run allocates.
  CHECK(kv_bytes("llmctl") == (3 * 32768 + 15 * 65 * 16) * kCell);
  // vLLM keeps the window's 512 tokens.
  CHECK(kv_bytes("vllm") == (3 * 32768 + 15 * 512) * kCell);
}
