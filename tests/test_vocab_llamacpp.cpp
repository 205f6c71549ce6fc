// llama.cpp's tokenizer test vectors for every vocabulary in the shared data
// (vocab/ggml-vocab-NAME.gguf with .inp/.out, made by llama.cpp from the Hugging Face
// tokenizers of the same models): each input must encode to exactly the expected ids, and
// decode back to the input. Also SmolLM2's GGUF against a plain-Python BPE
// (tests/fixtures/bpe_reference_smollm2.json, tools/gen_bpe_reference_ids.py), and the
// pre-tokenizer override of TokenizerOptions.

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "support/fixtures.h"
#include "support/test_data.h"
#include "support/vocab_cases.h"
#include "tokenizer/tokenizer.h"

namespace {

void check_vocab(const std::string& name) {
  const std::string rel = "vocab/ggml-vocab-" + name + ".gguf";
  const auto cases = llmctl::test::load_vocab_cases(rel);
  const auto tok = llmctl::Tokenizer::from_file(llmctl::test::require_test_file(rel));
  REQUIRE(cases.size() > 40);
  size_t passed = 0;
  for (const auto& c : cases) {
    INFO(name << " input: \"" << llmctl::test::escape_for_message(c.text) << "\"");
    const std::vector<int32_t> ids = tok.encode(c.text, false);
    CHECK(ids == c.ids);
    if (ids == c.ids) ++passed;
  }
  UNSCOPED_INFO(name << ": " << passed << " of " << cases.size() << " cases");
  CHECK(passed == cases.size());
}

}  // namespace

TEST_CASE("llama-spm vocabulary matches llama.cpp", "[cpu][tokenizer][golden]") {
  check_vocab("llama-spm");
}
TEST_CASE("gpt-2 vocabulary matches llama.cpp", "[cpu][tokenizer][golden]") {
  check_vocab("gpt-2");
}
TEST_CASE("llama-bpe vocabulary matches llama.cpp", "[cpu][tokenizer][golden]") {
  check_vocab("llama-bpe");
}
TEST_CASE("qwen2 vocabulary matches llama.cpp", "[cpu][tokenizer][golden]") {
  check_vocab("qwen2");
}
TEST_CASE("starcoder vocabulary matches llama.cpp", "[cpu][tokenizer][golden]") {
  check_vocab("starcoder");
}
TEST_CASE("deepseek-coder vocabulary matches llama.cpp", "[cpu][tokenizer][golden]") {
  check_vocab("deepseek-coder");
}

TEST_CASE("SmolLM2's GGUF tokenizes as a plain-Python BPE does", "[cpu][tokenizer][golden]") {
  const auto tok = llmctl::Tokenizer::from_file(
      llmctl::test::require_test_file("models/SmolLM2-135M-Instruct.Q4_1.gguf"));
  CHECK(tok.pre_tokenizer() == "smollm");
  CHECK_FALSE(tok.pre_tokenizer_defaulted());
  const auto doc = nlohmann::json::parse(
      llmctl::test::read_file(llmctl::test::fixture_path("bpe_reference_smollm2.json")));
  size_t n = 0;
  for (const auto& c : doc.at("cases")) {
    const std::string text = c.at("text").get<std::string>();
    INFO("input: \"" << llmctl::test::escape_for_message(text) << "\"");
    CHECK(tok.encode(text, false) == c.at("ids").get<std::vector<int32_t>>());
    ++n;
  }
  CHECK(n == 10);
}

TEST_CASE("TokenizerOptions::pre_tokenizer replaces the file's pre-tokenizer", "[cpu][tokenizer]") {
  const std::string path = llmctl::test::require_test_file("vocab/ggml-vocab-qwen2.gguf");
  const auto own = llmctl::Tokenizer::from_file(path);
  CHECK(own.pre_tokenizer() == "qwen2");
  llmctl::TokenizerOptions opts;
  opts.pre_tokenizer = "gpt-2";
  const auto other = llmctl::Tokenizer::from_file(path, opts);
  CHECK(other.pre_tokenizer() == "gpt-2");
  // qwen2's (?i:'s) keeps "'S" together; GPT-2's case-sensitive 's splits it "'", "S".
  const std::string text = "HE'S HERE";
  CHECK(own.encode(text, false).size() < other.encode(text, false).size());
  CHECK(own.decode(other.encode(text, false)) == text);

  opts.pre_tokenizer = "qwen-2";
  try {
    llmctl::Tokenizer::from_file(path, opts);
    FAIL("no error for an unknown override");
  } catch (const llmctl::Error& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("'qwen-2'") && Catch::Contains("qwen2"));
  }
  opts.pre_tokenizer = "gpt-2";
  CHECK_THROWS_AS(llmctl::Tokenizer::from_file(
                      llmctl::test::require_test_file("vocab/ggml-vocab-llama-spm.gguf"), opts),
                  llmctl::Error);
}
