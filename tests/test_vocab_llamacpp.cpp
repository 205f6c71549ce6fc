// llama.cpp's tokenizer test vectors for every vocabulary in the shared data
// (vocab/ggml-vocab-NAME.gguf with .inp/.out, made by llama.cpp from the Hugging Face
// tokenizers of the same models): each input must encode to exactly the expected ids, and
// decode back to the input.

#include <catch2/catch.hpp>
#include <string>
#include <vector>

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
