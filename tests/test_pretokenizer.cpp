// Pre-tokenizers: the hand-written GPT-2 and Llama 3 matchers against the splits the Python
// `regex` module makes (tests/fixtures/pretokenizer_cases.json, from
// tools/gen_pretokenizer_fixture.py), plus the name mapping and invalid UTF-8.

#include <catch2/catch.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "support/fixtures.h"
#include "support/test_data.h"
#include "tokenizer/pretokenizer.h"

using llmctl::PreTokenizer;

namespace {

std::vector<std::string> split(PreTokenizer kind, const std::string& text) {
  std::vector<std::string> out;
  for (std::string_view piece : llmctl::pre_tokenize(kind, text)) out.emplace_back(piece);
  return out;
}

std::string join(const std::vector<std::string_view>& pieces) {
  std::string out;
  for (std::string_view p : pieces) out += p;
  return out;
}

// Pieces rendered for a failure message, with the control characters made visible.
std::string show(const std::vector<std::string>& pieces) {
  std::string out = "[";
  for (const std::string& p : pieces) {
    out += out.size() > 1 ? ", \"" : "\"";
    for (char c : p) {
      if (c == '\n')
        out += "\\n";
      else if (c == '\r')
        out += "\\r";
      else if (c == '\t')
        out += "\\t";
      else
        out += c;
    }
    out += '"';
  }
  return out + "]";
}

nlohmann::json load_fixture() {
  return nlohmann::json::parse(
      llmctl::test::read_file(llmctl::test::fixture_path("pretokenizer_cases.json")));
}

void check_fixture(PreTokenizer kind, const char* key) {
  const nlohmann::json doc = load_fixture();
  const auto& cases = doc.at("cases");
  REQUIRE(cases.size() > 400);
  size_t failures = 0;
  for (const auto& c : cases) {
    const std::string text = c.at("text").get<std::string>();
    const auto expected = c.at(key).get<std::vector<std::string>>();
    const auto got = split(kind, text);
    if (got != expected) {
      ++failures;
      UNSCOPED_INFO("text " << show({text}) << "\n  expected " << show(expected) << "\n  got      "
                            << show(got));
    }
  }
  CHECK(failures == 0);
}

}  // namespace

TEST_CASE("GPT-2 pre-tokenizer splits as the regex module does", "[cpu][tokenizer][golden]") {
  check_fixture(PreTokenizer::Gpt2, "gpt2");
}

TEST_CASE("Llama 3 pre-tokenizer splits as the regex module does", "[cpu][tokenizer][golden]") {
  check_fixture(PreTokenizer::Llama3, "llama3");
}

TEST_CASE("Pre-tokenizer spot checks", "[cpu][tokenizer]") {
  using V = std::vector<std::string>;
  CHECK(split(PreTokenizer::Gpt2, "") == V{});
  CHECK(split(PreTokenizer::Gpt2, "  Hello") == V{" ", " Hello"});
  CHECK(split(PreTokenizer::Gpt2, "I'll 2024") == V{"I", "'ll", " 2024"});
  CHECK(split(PreTokenizer::Gpt2, "HE'S") == V{"HE", "'", "S"});
  CHECK(split(PreTokenizer::Llama3, "HE'S") == V{"HE", "'S"});
  CHECK(split(PreTokenizer::Llama3, "1234567") == V{"123", "456", "7"});
  CHECK(split(PreTokenizer::Llama3, "a\r\n\r\n  b") == V{"a", "\r\n\r\n", " ", " b"});
  CHECK(split(PreTokenizer::Llama3, "\tx ..\n\ny") == V{"\tx", " ..\n\n", "y"});
}

TEST_CASE("tokenizer.ggml.pre names map to the two patterns", "[cpu][tokenizer]") {
  for (const char* name : {"default", "gpt-2", "gpt2", ""})
    CHECK(llmctl::pre_tokenizer_from_name(name) == PreTokenizer::Gpt2);
  for (const char* name : {"llama3", "llama-bpe", "llama-v3"})
    CHECK(llmctl::pre_tokenizer_from_name(name) == PreTokenizer::Llama3);
  CHECK(std::string(llmctl::pre_tokenizer_name(PreTokenizer::Llama3)) == "llama3");
  try {
    llmctl::pre_tokenizer_from_name("qwen2");
    FAIL("no error for an unknown pre-tokenizer");
  } catch (const llmctl::Error& e) {
    const std::string what = e.what();
    CHECK(what.find("'qwen2'") != std::string::npos);
    CHECK(what.find("gpt-2") != std::string::npos);
    CHECK(what.find("llama-bpe") != std::string::npos);
  }
}

TEST_CASE("Invalid UTF-8 is split without loss", "[cpu][tokenizer]") {
  using V = std::vector<std::string>;
  // A stray continuation byte and a truncated sequence are units of their own, classed like
  // U+FFFD (punctuation-like), and keep their original bytes.
  CHECK(split(PreTokenizer::Gpt2, "ab\x80\x80 cd") == V{"ab", "\x80\x80", " cd"});
  CHECK(split(PreTokenizer::Gpt2, " \xE4\xB8") == V{" \xE4\xB8"});
  CHECK(split(PreTokenizer::Llama3, "x\xFF\n") == V{"x", "\xFF\n"});

  // Random bytes: pieces are non-empty and concatenate back to the input, for both kinds.
  std::mt19937 rng(12345);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_int_distribution<int> length(0, 64);
  const char* const favourites = " \t\r\n'sSa1\xC3\xA9\xE4\xB8\xAD\x80\xFF";
  for (int round = 0; round < 2000; ++round) {
    std::string text;
    const int n = length(rng);
    for (int i = 0; i < n; ++i) {
      const int b = byte(rng);
      // Half the bytes from a small set of interesting ones, so the patterns get exercised.
      text += b < 128 ? favourites[static_cast<size_t>(b) % 16] : static_cast<char>(byte(rng));
    }
    for (PreTokenizer kind : {PreTokenizer::Gpt2, PreTokenizer::Llama3}) {
      const auto pieces = llmctl::pre_tokenize(kind, text);
      for (std::string_view p : pieces) REQUIRE(!p.empty());
      REQUIRE(join(pieces) == text);
    }
  }
}
