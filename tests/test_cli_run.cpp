// `llmctl run` as users and scripts call it: golden greedy output, --json, --logits-out,
// stop rules, exit codes, and the summary line that ends stderr.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "backend/cpu/weight_repack.h"
#include "core/ggml_type.h"
#include "support/run_cli.h"
#include "support/test_data.h"

using llmctl::test::require_test_file;
using llmctl::test::run_llmctl;

namespace {

nlohmann::json golden() {
  return nlohmann::json::parse(
      llmctl::test::read_file(require_test_file("golden/stories260K-greedy.jsonl")));
}

// The last line of stderr, split into key=value pairs; fails the test if it is not one.
std::map<std::string, std::string> summary(const std::string& err) {
  std::string s = err;
  REQUIRE(!s.empty());
  REQUIRE(s.back() == '\n');
  s.pop_back();
  const std::string last = s.substr(s.rfind('\n') == std::string::npos ? 0 : s.rfind('\n') + 1);
  INFO("summary line: " << last);
  std::istringstream in(last);
  std::string word;
  in >> word;
  REQUIRE(word == "llmctl-run:");
  std::map<std::string, std::string> kv;
  while (in >> word) {
    const size_t eq = word.find('=');
    REQUIRE(eq != std::string::npos);
    REQUIRE(eq > 0);
    REQUIRE(eq + 1 < word.size());
    kv[word.substr(0, eq)] = word.substr(eq + 1);
  }
  for (const char* key : {"load_ms", "prompt_tokens", "gen_tokens", "ttft_ms", "prefill_tok_s",
                          "decode_tok_s", "p50_ms", "p95_ms", "finish", "seed", "logits_hash"})
    CHECK(kv.count(key) == 1);
  return kv;
}

}  // namespace

TEST_CASE("run reproduces the golden greedy continuation (--json and streamed)", "[cli][golden]") {
  const std::string model = require_test_file("models/stories260K.gguf");
  const auto g = golden();
  auto r = run_llmctl(
      {"run", "-m", model, "-p", "Once upon a time", "-n", "48", "--temp", "0", "--json"});
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["prompt_ids"] == g["prompt_ids"]);
  CHECK(j["generated_ids"] == g["generated_ids"]);
  CHECK(j["text"] == g["generated_text"]);
  CHECK(j["finish_reason"] == "n_predict");
  CHECK(j["timings"].contains("ttft_ms"));
  auto kv = summary(r.err);
  CHECK(kv["prompt_tokens"] == "5");
  CHECK(kv["gen_tokens"] == "48");
  CHECK(kv["finish"] == "n_predict");
  CHECK(kv["logits_hash"].size() == 16);
  const std::string hash = kv["logits_hash"];

  r = run_llmctl({"run", "-m", model, "-p", "Once upon a time", "-n", "48", "--temp", "0"});
  REQUIRE(r.code == 0);
  CHECK(r.out == g["generated_text"].get<std::string>());  // nothing but the text on stdout
  CHECK(summary(r.err)["logits_hash"] == hash);            // deterministic

  r = run_llmctl(
      {"run", "-m", model, "-p", "Once upon a time", "-n", "48", "--temp", "0", "--echo"});
  CHECK(r.out == "Once upon a time" + g["generated_text"].get<std::string>());
}

TEST_CASE("run --logits-out writes one float32 row per prompt position", "[cli][golden]") {
  const std::string model = require_test_file("models/stories260K.gguf");
  const auto g = golden();
  const std::string path = llmctl::test::temp_dir() + "/logits.f32";
  const auto r = run_llmctl({"run", "-m", model, "-p", "Once upon a time", "-n", "1", "--temp", "0",
                             "--logits-out", path});
  REQUIRE(r.code == 0);
  const std::string bytes = llmctl::test::read_file(path);
  const size_t n_vocab = 512;
  const size_t n_prompt = g["prompt_ids"].size();
  REQUIRE(bytes.size() == n_prompt * n_vocab * 4);
  std::vector<float> last(n_vocab);
  // The host is little-endian (x86-64, aarch64), like the file.
  std::memcpy(last.data(), bytes.data() + (n_prompt - 1) * n_vocab * 4, n_vocab * 4);
  const auto argmax = std::max_element(last.begin(), last.end()) - last.begin();
  CHECK(argmax == g["generated_ids"][0].get<int>());
  // -n 1 runs no decode step, so the hashed logits are the last row of the file.
  uint64_t h = 14695981039346656037ULL;
  for (size_t i = (n_prompt - 1) * n_vocab * 4; i < bytes.size(); ++i) {
    h ^= static_cast<unsigned char>(bytes[i]);
    h *= 1099511628211ULL;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  CHECK(summary(r.err)["logits_hash"] == std::string(hex));
}

TEST_CASE("run stops with finish_reason length when the context fills", "[cli]") {
  const std::string model = require_test_file("models/stories260K.gguf");
  const auto r = run_llmctl({"run", "-m", model, "-p", "Once upon a time", "-c", "8", "--json"});
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["finish_reason"] == "length");
  CHECK(j["generated_ids"].size() == 3);  // 5 prompt + 3 generated = 8 positions
  CHECK(r.err.find("context full") != std::string::npos);
  CHECK(summary(r.err)["finish"] == "length");

  // A prompt longer than the context is a user error, not a crash.
  const auto too_long = run_llmctl({"run", "-m", model, "-p", "Once upon a time", "-c", "3"});
  CHECK(too_long.code == 1);
  CHECK(too_long.err.find("-c/--ctx-size") != std::string::npos);
}

TEST_CASE("run reads the prompt from stdin or a file", "[cli]") {
  const std::string model = require_test_file("models/stories260K.gguf");
  const auto a =
      run_llmctl({"run", "-m", model, "-n", "8", "--temp", "0", "--json"}, "Once upon a time");
  REQUIRE(a.code == 0);
  const auto ja = nlohmann::json::parse(a.out);
  CHECK(ja["prompt_ids"] == nlohmann::json::array({1, 403, 407, 261, 378}));
  const std::string path = llmctl::test::temp_dir() + "/prompt.txt";
  llmctl::test::write_file(path, "Once upon a time");
  const auto b = run_llmctl({"run", "-m", model, "-n", "8", "--temp", "0", "--json", "-f", path});
  REQUIRE(b.code == 0);
  CHECK(nlohmann::json::parse(b.out)["generated_ids"] == ja["generated_ids"]);
  const auto c = run_llmctl({"run", "-m", model, "-n", "8", "--temp", "0", "--json", "--no-bos",
                             "-p", "Once upon a time"});
  CHECK(nlohmann::json::parse(c.out)["prompt_ids"] == nlohmann::json::array({403, 407, 261, 378}));
  const auto both = run_llmctl({"run", "-m", model, "-p", "x", "-f", path});
  CHECK(both.code == 2);
}

TEST_CASE("run usage and input errors have their exit codes", "[cli]") {
  const std::string model = require_test_file("models/stories260K.gguf");
  auto r = run_llmctl({"run", "-m", model, "-p", "x", "--top-p", "2"});
  CHECK(r.code == 2);
  CHECK(r.out.empty());
  CHECK(r.err.find("top_p must be in (0, 1]") != std::string::npos);
  r = run_llmctl({"run", "-m", model, "-p", "x", "--temp", "-1"});
  CHECK(r.code == 2);
  r = run_llmctl({"run", "-m", model, "-p", "x", "--stop", ""});
  CHECK(r.code == 2);
  r = run_llmctl({"run", "-m", "/nonexistent/model.gguf", "-p", "x"});
  CHECK(r.code == 1);
  CHECK(r.err.find("/nonexistent/model.gguf") != std::string::npos);
  CHECK(r.err.find("check the path") != std::string::npos);   // fetch-models is for the default
  if (!std::filesystem::exists("models/stories260K.gguf")) {  // the default model, absent here
    r = run_llmctl({"run", "-p", "x"});
    CHECK(r.code == 1);
    CHECK(r.err.find("models/stories260K.gguf") != std::string::npos);
    CHECK(r.err.find("scripts/fetch-models.sh") != std::string::npos);
  }
  r = run_llmctl({"run", "-m", model, "-p", "x", "-c", "0"});
  CHECK(r.code == 2);
  r = run_llmctl({"run", "-m", model, "-p", "x", "-n", "-2"});
  CHECK(r.code == 2);
  r = run_llmctl({"run", "-m", model, "--no-bos", "-p", ""});
  CHECK(r.code == 1);  // no token to predict from
  r = run_llmctl({"run", "-m", model, "-p", "x", "-n", "2", "-t", "4"});
  CHECK(r.code == 0);
}

TEST_CASE("run --help documents the summary line", "[cli]") {
  const auto r = run_llmctl({"run", "--help"});
  REQUIRE(r.code == 0);
  CHECK(r.out.find("llmctl-run: load_ms=") != std::string::npos);
  CHECK(r.out.find("thread- and batch-invariant") != std::string::npos);
  CHECK(r.out.find("Sampling order: penalties, top-k") != std::string::npos);
}

TEST_CASE("run samples reproducibly by seed", "[cli]") {
  const std::string model = require_test_file("models/stories260K.gguf");
  const std::vector<std::string> base{
      "run",     "-m", model,     "-p", "Once upon a time", "-n", "40",    "--temp", "1.5",
      "--top-k", "0",  "--top-p", "1",  "--min-p",          "0",  "--json"};
  auto with_seed = [&](const char* seed) {
    std::vector<std::string> args = base;
    args.insert(args.end(), {"--seed", seed});
    const auto r = run_llmctl(args);
    REQUIRE(r.code == 0);
    return nlohmann::json::parse(r.out);
  };
  const auto a = with_seed("7"), b = with_seed("7"), c = with_seed("8");
  CHECK(a["generated_ids"] == b["generated_ids"]);
  CHECK(a["seed"] == 7);
  // 40 draws at temperature 1.5 over the full vocabulary: two seeds agreeing everywhere
  // would mean the seed is ignored.
  CHECK(a["generated_ids"] != c["generated_ids"]);
  // Without --seed a random one is used and reported, so the run can be repeated.
  const auto r = run_llmctl({"run", "-m", model, "-p", "Once upon a time", "-n", "4"});
  REQUIRE(r.code == 0);
  CHECK(!summary(r.err)["seed"].empty());
}

TEST_CASE("run --stop ends before the stop string", "[cli][golden]") {
  const std::string model = require_test_file("models/stories260K.gguf");
  const auto g = golden();
  const std::string text =
      g["generated_text"].get<std::string>();  // ", there was a little girl named Lily. ..."
  const auto r = run_llmctl({"run", "-m", model, "-p", "Once upon a time", "-n", "48", "--temp",
                             "0", "--stop", "Lily", "--json"});
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["finish_reason"] == "stop");
  CHECK(j["text"] == text.substr(0, text.find("Lily")));
  const auto streamed = run_llmctl(
      {"run", "-m", model, "-p", "Once upon a time", "-n", "48", "--temp", "0", "--stop", "Lily"});
  CHECK(streamed.out == text.substr(0, text.find("Lily")));
  CHECK(summary(streamed.err)["finish"] == "stop");
}

TEST_CASE("run prepares the weights for the kernels at load, outside the prompt's timing",
          "[cli]") {
  // SmolLM2's matrices are Q4_1 and Q8_0: repacked into 16-row records wherever the fast CPU
  // kernels read them so (AVX2 or AVX-512). Done at load, the copies exist before the first
  // forward pass; left to the first matmul, they did not, and the prompt's time paid for them.
  const std::string model = require_test_file("models/SmolLM2-135M-Instruct.Q4_1.gguf");
  const std::vector<std::string> args{"run", "-m", model, "-p", "Hi", "-n", "1", "-t", "2"};
  const char* line = "llmctl: weights prepared for the kernels: ";
  if (llmctl::cpu::repack_active(llmctl::GgmlType::Q4_1)) {
    const auto r = run_llmctl(args);
    REQUIRE(r.code == 0);
    const size_t at = r.err.find(line);
    REQUIRE(at != std::string::npos);
    // before the prompt ran, and with the load time it is part of
    CHECK(at < r.err.find("llmctl: prompt "));
    CHECK(r.err.find("repacked or copied in", at) != std::string::npos);
    CHECK(r.err.find("MiB", at) < r.err.find('\n', at));
  }
  setenv("LLMCTL_MATMUL_REPACK", "off", 1);
  const auto off = run_llmctl(args);
  unsetenv("LLMCTL_MATMUL_REPACK");
  REQUIRE(off.code == 0);
  CHECK(off.err.find(line) == std::string::npos);  // nothing copied: the file's pages serve
}
