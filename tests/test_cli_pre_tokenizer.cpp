// `llmctl tokenize` on a real byte-level BPE model (SmolLM2, pre-tokenizer 'smollm') against
// llama.cpp's own prompt ids (tests/fixtures/llamacpp_smollm2.json, tools/llamacpp_reference.py),
// and the --pre-tokenizer override with its errors.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>

#include "support/fixtures.h"
#include "support/run_cli.h"
#include "support/test_data.h"

using llmctl::test::require_test_file;
using llmctl::test::run_llmctl;

namespace {

std::vector<int32_t> ids_of(const std::string& out) {
  std::vector<int32_t> ids;
  std::istringstream in(out);
  for (int32_t id; in >> id;) ids.push_back(id);
  return ids;
}

}  // namespace

TEST_CASE("tokenize gives llama.cpp's prompt ids on SmolLM2's vocabulary", "[cli][golden]") {
  const std::string m = require_test_file("models/SmolLM2-135M-Instruct.Q4_1.gguf");
  const nlohmann::json ref = nlohmann::json::parse(
      llmctl::test::read_file(llmctl::test::fixture_path("llamacpp_smollm2.json")));
  int n = 0;
  for (const auto& c : ref.at("cases")) {
    std::vector<std::string> args = {"tokenize", "-m", m, "--format", "ids",
                                     c.at("prompt").get<std::string>()};
    if (!c.at("add_bos").get<bool>()) args.push_back("--no-bos");
    const auto r = run_llmctl(args);
    INFO(c.at("name").get<std::string>() << ": " << r.err);
    REQUIRE(r.code == 0);
    CHECK(ids_of(r.out) == c.at("prompt_ids").get<std::vector<int32_t>>());
    ++n;
  }
  CHECK(n >= 6);
}

TEST_CASE("pre-tokenizer option overrides the file's name and an unknown one suggests names", "[cli]") {
  const std::string m = require_test_file("models/SmolLM2-135M-Instruct.Q4_1.gguf");
  const std::string text = "Hello\n\n\nworld";
  const auto own = run_llmctl({"tokenize", "-m", m, text});
  const auto same = run_llmctl({"tokenize", "-m", m, "--pre-tokenizer", "smollm", text});
  const auto llama3 = run_llmctl({"tokenize", "-m", m, "--pre-tokenizer", "llama3", text});
  REQUIRE(own.code == 0);
  REQUIRE(same.code == 0);
  REQUIRE(llama3.code == 0);
  CHECK(own.out == same.out);
  // smollm (GPT-2's regex) leaves the last newline of a run to its own piece (llama.cpp's ids
  // through llama-cpp-python 0.3.36: 19556 1116 198 6693); llama3's \s*[\r\n]+ keeps the
  // run together, so its ids differ.
  CHECK(ids_of(own.out) == std::vector<int32_t>{19556, 1116, 198, 6693});
  CHECK(ids_of(llama3.out) != ids_of(own.out));
  const auto bad = run_llmctl({"tokenize", "-m", m, "--pre-tokenizer", "qwen", text});
  CHECK(bad.code == 1);
  CHECK(bad.err.find("qwen2") != std::string::npos);  // the closest known name
  // The typed name is the user's mistake: the message names the option, not the model file.
  CHECK(bad.err.find("--pre-tokenizer: unknown pre-tokenizer 'qwen'") != std::string::npos);
  CHECK(bad.err.find(m) == std::string::npos);
}
