// Hugging Face tokenizer.json loading against the `tokenizers` library itself
// (tests/fixtures/hf_tokenizer_json*, from tools/gen_hf_tokenizer_json_fixture.py): two
// reduced SmolLM2 vocabularies (Digits+ByteLevel, and Split+ByteLevel with a BOS template)
// give `tokenizers`' ids, and the ids `tokenizers` gives with the full SmolLM2 tokenizer are
// the reference ids our GGUF path is tested against. Below the same for the SentencePiece-style
// files (Llama 2 and Gemma layouts, byte fallback) and an NFC normalizer.

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
#include "tokenizer/text_normalizer.h"
#include "tokenizer/tokenizer.h"

namespace {

nlohmann::json expected() {
  return nlohmann::json::parse(
      llmctl::test::read_file(llmctl::test::fixture_path("hf_tokenizer_json_ids.json")));
}

// Each case of the fixture `ids_file` through tokenizer.json `style`: ids as `tokenizers`
// gives them (with and without specials), and the decoded text (`decoded_key`, or the input).
void check_style(const std::string& ids_file, const std::string& style, size_t n_cases,
                 bool with_specials, const std::string& decoded_key) {
  const auto tok = llmctl::Tokenizer::from_file(
      llmctl::test::fixture_path("hf_tokenizer_json/" + style + "/tokenizer.json"));
  CHECK(tok.n_vocab() == 3000);
  const nlohmann::json doc =
      nlohmann::json::parse(llmctl::test::read_file(llmctl::test::fixture_path(ids_file)));
  size_t n = 0;
  for (const auto& c : doc.at("cases")) {
    const std::string text = c.at("text").get<std::string>();
    INFO(style << " input: \"" << llmctl::test::escape_for_message(text) << "\"");
    const auto ids = tok.encode(text, false);
    CHECK(ids == c.at(style).get<std::vector<int32_t>>());
    if (with_specials)
      CHECK(tok.encode(text, tok.add_bos_default()) ==
            c.at(style + "_with_specials").get<std::vector<int32_t>>());
    CHECK(tok.decode(ids) == (decoded_key.empty() ? text : c.at(decoded_key).get<std::string>()));
    ++n;
  }
  CHECK(n == n_cases);
}

void check_json_style(const std::string& style) {
  check_style("hf_tokenizer_json_ids.json", style, 10, true, "");
  CHECK(llmctl::Tokenizer::from_file(llmctl::test::fixture_path("hf_tokenizer_json/" + style +
                                                                "/tokenizer.json"))
            .kind() == "gpt2");
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
  const std::string byte_level = R"("pre_tokenizer": {"type": "ByteLevel", "use_regex": true}, )";
  CHECK_THAT(message("{" + byte_level + R"("model": {"type": "BPE", "byte_fallback": true, )" + vocab + "}}"),
             Catch::Contains("byte-level BPE with byte_fallback"));
  CHECK_THAT(message(R"({"model": {"type": "BPE", )" + vocab + "}}"),
             Catch::Contains("without byte_fallback"));
  CHECK_THAT(message(R"({"normalizer": {"type": "Lowercase"}, )" + byte_level +
                     R"("model": {"type": "BPE", )" + vocab + "}}"),
             Catch::Contains("normalizer Lowercase"));
  CHECK_THAT(message(R"({"normalizer": {"type": "Replace", "pattern": {"Regex": " +"}, "content": " "}, )" +
                     byte_level + R"("model": {"type": "BPE", )" + vocab + "}}"),
             Catch::Contains("Replace with a Regex pattern"));
  CHECK_THAT(message(R"({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Digits"},
                 {"type": "ByteLevel", "add_prefix_space": true}]}, "model": {"type": "BPE", )" + vocab + "}}"),
             Catch::Contains("add_prefix_space after another pre-tokenizer"));
  CHECK_THAT(message(R"({"pre_tokenizer": {"type": "Metaspace", "split": true}, "model": {"type": "BPE", "byte_fallback": true, )" +
                     vocab + "}}"),
             Catch::Contains("Metaspace with split"));
  CHECK_THAT(message(R"({"decoder": {"type": "WordPiece"}, "model": {"type": "BPE", "byte_fallback": true, )" +
                     vocab + "}}"),
             Catch::Contains("decoder WordPiece"));
  CHECK_THAT(message("{" + byte_level + R"("model": {"type": "BPE", "vocab": {"a": 0, "b": 2}, "merges": []}})"),
             Catch::Contains("id 1"));
  CHECK_THAT(message("{" + byte_level + R"("model": {"type": "BPE", )" + vocab + "}}"),
             Catch::Contains("(no error)"));
  CHECK_THAT(message(R"({"normalizer": {"type": "NFC"}, )" + byte_level + R"("model": {"type": "BPE", )" +
                     vocab + "}}"),
             Catch::Contains("(no error)"));
  CHECK_THAT(message(R"({"model": {"type": "BPE", "byte_fallback": true, )" + vocab + "}}"),
             Catch::Contains("(no error)"));
  std::filesystem::remove_all(dir);
}

// SentencePiece-style BPE (byte_fallback) and the normalizers, against `tokenizers` itself
// (tests/fixtures/hf_tokenizer_json_spm_ids.json, tools/gen_hf_spm_tokenizer_json_fixture.py).
namespace {

nlohmann::json spm_expected() {  // the SentencePiece-style fixture's ids
  return nlohmann::json::parse(
      llmctl::test::read_file(llmctl::test::fixture_path("hf_tokenizer_json_spm_ids.json")));
}

void check_spm_style(const std::string& style, bool with_specials) {
  check_style("hf_tokenizer_json_spm_ids.json", style, 14, with_specials, style + "_decoded");
}

}  // namespace

TEST_CASE("tokenizer.json in Llama 2's style (byte fallback, dummy prefix) matches tokenizers",
          "[cpu][tokenizer][golden]") {
  check_spm_style("llama2", true);
  const auto tok = llmctl::Tokenizer::from_hf_tokenizer_json(
      llmctl::test::fixture_path("hf_tokenizer_json/llama2/tokenizer.json"));
  CHECK(tok.bos_id() == 1);
  CHECK(tok.add_bos_default());
  CHECK(tok.token_type(1) == llmctl::TokenType::Control);
  CHECK(tok.token_type(3) == llmctl::TokenType::Byte);  // "<0x00>"
  CHECK(tok.kind() == "llama");
  // Streaming gives decode()'s text (byte fallback pieces joined into characters).
  for (const std::string text : {"Hello world", "emoji \xF0\x9F\x98\x80 and caf\xC3\xA9"}) {
    const auto ids = tok.encode(text, false);
    llmctl::StreamDecoder stream(tok);
    std::string streamed;
    for (const int32_t id : ids) streamed += stream.push(id);
    streamed += stream.flush();
    CHECK(streamed == tok.decode(ids));
    CHECK(streamed == text);
  }
}

TEST_CASE("tokenizer.json in Gemma's style (byte fallback, no dummy prefix) matches tokenizers",
          "[cpu][tokenizer][golden]") {
  check_spm_style("gemma", true);
}

TEST_CASE("tokenizer.json with an NFC normalizer (Qwen2.5's layout) matches tokenizers",
          "[cpu][tokenizer][golden]") {
  check_spm_style("nfc", false);
}

TEST_CASE("tokenizer.json with ByteLevel add_prefix_space (GPT-2/RoBERTa layout) matches tokenizers",
          "[cpu][tokenizer][golden]") {
  check_spm_style("prefix", false);
}

// The full Llama 2 vocabulary as a tokenizer.json (built as transformers converts it; 2 MB,
// not committed) gives `tokenizers` the ids our GGUF path gives through libsentencepiece.
TEST_CASE("tokenizers' ids for the full Llama 2 tokenizer.json equal the GGUF path's",
          "[cpu][tokenizer][golden]") {
  const auto tok =
      llmctl::Tokenizer::from_file(llmctl::test::require_test_file("vocab/ggml-vocab-llama-spm.gguf"));
  const nlohmann::json doc = spm_expected();
  for (const auto& c : doc.at("cases")) {
    const std::string text = c.at("text").get<std::string>();
    INFO("input: \"" << llmctl::test::escape_for_message(text) << "\"");
    CHECK(tok.encode(text, false) == c.at("llama2_full").get<std::vector<int32_t>>());
  }
}

// Unicode facts (UAX #15), not outputs of our code: what each normalizer step must do.
TEST_CASE("normalizer steps: Unicode forms, Prepend, Replace, invalid bytes kept", "[cpu][tokenizer]") {
  using llmctl::TextNormalizer;
  using Kind = TextNormalizer::Kind;
  CHECK(llmctl::unicode_normalize("cafe\u0301", Kind::Nfc) == "caf\u00e9");
  CHECK(llmctl::unicode_normalize("\u212b", Kind::Nfc) == "\u00c5");       // Angstrom sign
  CHECK(llmctl::unicode_normalize("\u00e9", Kind::Nfd) == "e\u0301");
  CHECK(llmctl::unicode_normalize("\ufb01", Kind::Nfc) == "\ufb01");       // ligature kept
  CHECK(llmctl::unicode_normalize("\ufb01", Kind::Nfkc) == "fi");
  CHECK(llmctl::unicode_normalize("\u1100\u1161\u11a8", Kind::Nfc) == "\uac01");  // Hangul
  CHECK(llmctl::unicode_normalize("a\xff" "e\u0301\xc3", Kind::Nfc) == "a\xff\u00e9\xc3");
  const TextNormalizer llama2({{Kind::Prepend, "\u2581", ""}, {Kind::Replace, " ", "\u2581"}});
  CHECK(llama2.apply("Hello  world") == "\u2581Hello\u2581\u2581world");
  CHECK(llama2.apply("").empty());  // Prepend leaves an empty text empty
  CHECK(TextNormalizer().apply("as is") == "as is");
  const TextNormalizer prefix({{Kind::PrefixSpace, "", ""}});
  CHECK(prefix.apply("hi") == " hi");
  CHECK(prefix.apply(" hi") == " hi");
  CHECK(prefix.apply("").empty());
}
