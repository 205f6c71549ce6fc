// Hugging Face tokenizer.json loading against the `tokenizers` library itself
// (tests/fixtures/hf_tokenizer_json*, from tools/gen_hf_tokenizer_json_fixture.py): two
// reduced SmolLM2 vocabularies (Digits+ByteLevel, and Split+ByteLevel with a BOS template)
// give `tokenizers`' ids, and the ids `tokenizers` gives with the full SmolLM2 tokenizer are
// the reference ids our GGUF path is tested against.

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "support/fixtures.h"
#include "support/test_data.h"
#include "support/vocab_cases.h"
#include "tokenizer/tokenizer.h"

namespace {

nlohmann::json expected() {
  return nlohmann::json::parse(
      llmctl::test::read_file(llmctl::test::fixture_path("hf_tokenizer_json_ids.json")));
}

void check_json_style(const std::string& style) {
  const auto tok = llmctl::Tokenizer::from_file(
      llmctl::test::fixture_path("hf_tokenizer_json/" + style + "/tokenizer.json"));
  CHECK(tok.kind() == "gpt2");
  CHECK(tok.n_vocab() == 3000);
  const nlohmann::json doc = expected();
  size_t n = 0;
  for (const auto& c : doc.at("cases")) {
    const std::string text = c.at("text").get<std::string>();
    INFO(style << " input: \"" << llmctl::test::escape_for_message(text) << "\"");
    const auto ids = tok.encode(text, false);
    CHECK(ids == c.at(style).get<std::vector<int32_t>>());
    CHECK(tok.encode(text, tok.add_bos_default()) ==
          c.at(style + "_with_specials").get<std::vector<int32_t>>());
    CHECK(tok.decode(ids) == text);
    ++n;
  }
  CHECK(n == 10);
}

}  // namespace

TEST_CASE("tokenizer.json with Digits and ByteLevel matches tokenizers", "[cpu][tokenizer][golden]") {
  check_json_style("digits");
}

TEST_CASE("tokenizer.json with Split, ByteLevel and a BOS template matches tokenizers",
          "[cpu][tokenizer][golden]") {
  check_json_style("split");
  const auto tok = llmctl::Tokenizer::from_hf_tokenizer_json(
      llmctl::test::fixture_path("hf_tokenizer_json/split/tokenizer.json"));
  CHECK(tok.bos_id() == 1);
  CHECK(tok.add_bos_default());
  CHECK(tok.token_type(0) == llmctl::TokenType::Control);
}

// test_vocab_llamacpp.cpp checks SmolLM2's GGUF against the plain-Python BPE's ids; here
// `tokenizers` with the full SmolLM2 vocabulary gives those same ids, so it equals our GGUF path.
TEST_CASE("tokenizers' ids for the full SmolLM2 tokenizer equal the GGUF reference ids",
          "[cpu][tokenizer][golden]") {
  const nlohmann::json doc = expected();
  const auto reference = nlohmann::json::parse(
      llmctl::test::read_file(llmctl::test::fixture_path("bpe_reference_smollm2.json")));
  REQUIRE(doc.at("cases").size() == reference.at("cases").size());
  for (size_t i = 0; i < doc.at("cases").size(); ++i) {
    const auto& c = doc.at("cases").at(i);
    const auto& r = reference.at("cases").at(i);
    REQUIRE(c.at("text") == r.at("text"));
    CHECK(c.at("full").get<std::vector<int32_t>>() == r.at("ids").get<std::vector<int32_t>>());
  }
}

TEST_CASE("tokenizer.json parts llmctl cannot run are errors naming them", "[cpu][tokenizer]") {
  const auto dir = std::filesystem::temp_directory_path() / "llmctl_test_hf_json";
  std::filesystem::create_directories(dir);
  auto message = [&](const std::string& body) -> std::string {
    const auto path = (dir / "tokenizer.json").string();
    std::ofstream(path) << body;
    try {
      llmctl::Tokenizer::from_hf_tokenizer_json(path);
    } catch (const llmctl::Error& e) {
      return e.what();
    }
    return "(no error)";
  };
  const std::string vocab = R"("vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"])";
  CHECK_THAT(message(R"({"model": {"type": "Unigram", "vocab": []}})"),
             Catch::Contains("model type Unigram"));
  CHECK_THAT(message(R"({"model": {"type": "BPE", "byte_fallback": true, )" + vocab + "}}"),
             Catch::Contains("byte_fallback"));
  CHECK_THAT(message(R"({"normalizer": {"type": "NFC"}, "model": {"type": "BPE", )" + vocab + "}}"),
             Catch::Contains("normalizer NFC"));
  CHECK_THAT(message(R"({"pre_tokenizer": {"type": "Metaspace"}, "model": {"type": "BPE", )" +
                     vocab + "}}"),
             Catch::Contains("pre_tokenizer Metaspace"));
  CHECK_THAT(message(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 2}, "merges": []}})"),
             Catch::Contains("id 1"));
  CHECK_THAT(message(R"({"model": {"type": "BPE", )" + vocab + "}}"), Catch::Contains("(no error)"));
  std::filesystem::remove_all(dir);
}
