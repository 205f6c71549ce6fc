// Pre-tokenizers: the table's GPT-2 and Llama 3 lists against the splits the Python `regex`
// module makes (tests/fixtures/pretokenizer_cases.json, from tools/gen_pretokenizer_fixture.py),
// the name lookup, and invalid UTF-8. The fuzzed corpus over every list is in
// test_pretokenizer_fuzz.cpp.

#include <catch2/catch.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "support/fixtures.h"
#include "support/test_data.h"
#include "tokenizer/pretokenizer.h"


namespace {

std::vector<std::string> split(const char* name, const std::string& text) {
  std::vector<std::string> out;
  for (std::string_view piece : llmctl::pre_tokenize(llmctl::find_pre_tokenizer(name), text))
    out.emplace_back(piece);
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

void check_fixture(const char* name, const char* key) {
  const nlohmann::json doc = load_fixture();
  const auto& cases = doc.at("cases");
  REQUIRE(cases.size() > 400);
  size_t failures = 0;
  for (const auto& c : cases) {
    const std::string text = c.at("text").get<std::string>();
    const auto expected = c.at(key).get<std::vector<std::string>>();
    const auto got = split(name, text);
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
  check_fixture("gpt-2", "gpt2");
}

TEST_CASE("Llama 3 pre-tokenizer splits as the regex module does", "[cpu][tokenizer][golden]") {
  check_fixture("llama-bpe", "llama3");
}

TEST_CASE("Pre-tokenizer spot checks", "[cpu][tokenizer]") {
  using V = std::vector<std::string>;
  CHECK(split("gpt-2", "") == V{});
  CHECK(split("gpt-2", "  Hello") == V{" ", " Hello"});
  CHECK(split("gpt-2", "I'll 2024") == V{"I", "'ll", " 2024"});
  CHECK(split("gpt-2", "HE'S") == V{"HE", "'", "S"});
  CHECK(split("llama3", "HE'S") == V{"HE", "'S"});
  CHECK(split("llama3", "1234567") == V{"123", "456", "7"});
  CHECK(split("llama3", "a\r\n\r\n  b") == V{"a", "\r\n\r\n", " ", " b"});
  CHECK(split("llama3", "\tx ..\n\ny") == V{"\tx", " ..\n\n", "y"});
}

TEST_CASE("tokenizer.ggml.pre names map to their regex lists", "[cpu][tokenizer]") {
  for (const char* name : {"gpt-2", "mpt", "olmo", "jais"})
    CHECK(llmctl::find_pre_tokenizer(name).list == "gpt2");
  for (const char* name : {"llama3", "llama-bpe", "llama-v3", "dbrx", "smaug-bpe"})
    CHECK(llmctl::find_pre_tokenizer(name).list == "llama3");
  for (const char* name : {"smollm", "starcoder", "refact", "command-r"})
    CHECK(llmctl::find_pre_tokenizer(name).list == "starcoder");
  CHECK(llmctl::find_pre_tokenizer("qwen2").list == "qwen2");
  CHECK(llmctl::find_pre_tokenizer("llama3").ignore_merges);
  CHECK(llmctl::find_pre_tokenizer("llama3").add_bos);
  CHECK(!llmctl::find_pre_tokenizer("qwen2").add_bos);
  CHECK(!llmctl::find_pre_tokenizer("gemma4").byte_encode);
  CHECK(llmctl::find_pre_tokenizer("default").patterns.size() == 4);
  try {
    llmctl::find_pre_tokenizer("qwen-2");
    FAIL("no error for an unknown pre-tokenizer");
  } catch (const llmctl::Error& e) {
    const std::string what = e.what();
    CHECK(what.find("'qwen-2'") != std::string::npos);
    CHECK(what.find("qwen2") != std::string::npos);  // the closest name is suggested
  }
}

TEST_CASE("Every table row has patterns that compile", "[cpu][tokenizer]") {
  const auto names = llmctl::known_pre_tokenizer_names();
  CHECK(names.size() >= 87);
  std::set<std::string> lists;
  for (const auto& spec : llmctl::pre_tokenizer_table()) {
    INFO(spec.name);
    REQUIRE(!spec.patterns.empty());
    CHECK_NOTHROW(llmctl::pre_tokenizer_splitter(spec));
    lists.insert(spec.list);
    // Every list covers its input: pieces concatenate back to the text.
    const std::string text = "Hello, World! 123 ABC's\r\n  x\t\u4e2d\u6587 12345";
    std::string joined;
    for (std::string_view p : llmctl::pre_tokenize(spec, text)) joined += p;
    CHECK(joined == text);
  }
  CHECK(lists.size() >= 29);
}

TEST_CASE("A missing tokenizer.ggml.pre is llama.cpp's default, flagged", "[cpu][tokenizer]") {
  const auto missing = llmctl::choose_pre_tokenizer(nullptr, "");
  CHECK(missing.spec->name == "default");
  CHECK(missing.defaulted);
  const std::string qwen = "qwen2";
  CHECK(llmctl::choose_pre_tokenizer(&qwen, "").spec->name == "qwen2");
  CHECK(!llmctl::choose_pre_tokenizer(&qwen, "").defaulted);
  CHECK(llmctl::choose_pre_tokenizer(&qwen, "smollm").spec->name == "smollm");
  CHECK(llmctl::choose_pre_tokenizer(nullptr, "gpt-2").spec->name == "gpt-2");
  CHECK_THROWS_AS(llmctl::choose_pre_tokenizer(&qwen, "nope"), llmctl::Error);
}

TEST_CASE("Invalid UTF-8 is split without loss", "[cpu][tokenizer]") {
  using V = std::vector<std::string>;
  // A stray continuation byte and a truncated sequence are units of their own, classed like
  // U+FFFD (punctuation-like), and keep their original bytes.
  CHECK(split("gpt-2", "ab\x80\x80 cd") == V{"ab", "\x80\x80", " cd"});
  CHECK(split("gpt-2", " \xE4\xB8") == V{" \xE4\xB8"});
  CHECK(split("llama3", "x\xFF\n") == V{"x", "\xFF\n"});

  // Random bytes: pieces are non-empty and concatenate back to the input, for both kinds.
  std::mt19937 rng(12345);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_int_distribution<int> length(0, 64);
  const char* const favourites = " \t\r\n'sSa1\xC3\xA9\xE4\xB8\xAD\x80\xFF";
  for (int round = 0; round < 300; ++round) {
    std::string text;
    const int n = length(rng);
    for (int i = 0; i < n; ++i) {
      const int b = byte(rng);
      // Half the bytes from a small set of interesting ones, so the patterns get exercised.
      text += b < 128 ? favourites[static_cast<size_t>(b) % 16] : static_cast<char>(byte(rng));
    }
    for (const auto& spec : llmctl::pre_tokenizer_table()) {
      const auto pieces = llmctl::pre_tokenize(spec, text);
      for (std::string_view p : pieces) REQUIRE(!p.empty());
      REQUIRE(join(pieces) == text);
    }
  }
}
