// Byte-level BPE (tokenizer.ggml.model = gpt2): the GPT-2 byte map, the merge loop on small
// hand-made vocabularies, llama.cpp's gpt-2 test vectors, and the GGUF metadata handling.

#include <algorithm>
#include <catch2/catch.hpp>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "support/test_data.h"
#include "support/vocab_cases.h"
#include "tokenizer/bpe.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_impl.h"

using llmctl::BpeModel;

namespace {

constexpr const char* kGpt2Vocab = "vocab/ggml-vocab-gpt-2.gguf";

std::vector<int32_t> bpe_encode(const BpeModel& model, const std::string& piece) {
  std::vector<int32_t> out;
  BpeModel::Scratch scratch;
  model.encode(piece, out, scratch);
  return out;
}

// A vocabulary of raw-byte tokens: the 256 single bytes first (ids 0..255), then `extra`.
std::vector<std::optional<std::string>> byte_vocab(const std::vector<std::string>& extra) {
  std::vector<std::optional<std::string>> v;
  for (int b = 0; b < 256; ++b) v.emplace_back(std::string(1, static_cast<char>(b)));
  for (const auto& e : extra) v.emplace_back(e);
  return v;
}

int32_t byte_id(char c) { return static_cast<int32_t>(static_cast<uint8_t>(c)); }

// A GGUF image with a tiny byte-level vocabulary, for the metadata rules.
std::shared_ptr<const std::vector<uint8_t>> tiny_gguf(
    const std::function<void(llmctl::GgufBuilder&)>& edit, bool with_merges = true) {
  namespace v = llmctl::gguf_value;
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b)
    tokens.push_back(llmctl::bytes_to_byte_level(std::string(1, static_cast<char>(b))));
  tokens.push_back("he");       // 256
  tokens.push_back("hel");      // 257
  tokens.push_back("<|end|>");  // 258
  llmctl::GgufBuilder b;
  b.set("general.architecture", v::string("gpt2"));
  b.set("tokenizer.ggml.model", v::string("gpt2"));
  b.set("tokenizer.ggml.tokens", v::string_array(tokens));
  std::vector<int32_t> types(tokens.size(), 1);
  types.back() = 3;
  b.set("tokenizer.ggml.token_type", v::i32_array(types));
  if (with_merges) b.set("tokenizer.ggml.merges", v::string_array({"h e", "he l"}));
  edit(b);
  return std::make_shared<const std::vector<uint8_t>>(b.build());
}

std::unique_ptr<llmctl::TokenizerImpl> tiny_tokenizer(
    const std::function<void(llmctl::GgufBuilder&)>& edit) {
  return llmctl::make_gpt2_gguf_tokenizer(
      llmctl::GgufFile::from_memory(tiny_gguf(edit), "tiny.gguf"));
}

}  // namespace

// ---------------------------------------------------------------------------
// Byte map
// ---------------------------------------------------------------------------

TEST_CASE("GPT-2 byte map is a bijection with the known layout", "[cpu][tokenizer]") {
  std::set<char32_t> seen;
  for (int b = 0; b < 256; ++b) {
    const char32_t cp = llmctl::byte_to_unicode(static_cast<uint8_t>(b));
    CHECK(llmctl::unicode_to_byte(cp) == b);
    seen.insert(cp);
  }
  CHECK(seen.size() == 256);
  CHECK(llmctl::byte_to_unicode('A') == U'A');
  CHECK(llmctl::byte_to_unicode(' ') == U'\u0120');   // Ġ
  CHECK(llmctl::byte_to_unicode('\n') == U'\u010A');  // Ċ
  CHECK(llmctl::byte_to_unicode(0x00) == U'\u0100');
  CHECK(llmctl::byte_to_unicode(0x7F) == U'\u0121');
  CHECK(llmctl::byte_to_unicode(0xAD) == U'\u0143');  // soft hyphen, the last unprintable byte
  CHECK(llmctl::byte_to_unicode(0xE9) == U'\u00E9');
  CHECK(llmctl::unicode_to_byte(U'\u0144') == -1);
  CHECK(llmctl::unicode_to_byte(U'\u4E2D') == -1);
  CHECK(llmctl::bytes_to_byte_level("Hi there\n") == "Hi\xC4\xA0there\xC4\x8A");
  CHECK(llmctl::byte_level_to_bytes("Hi\xC4\xA0there\xC4\x8A") == std::string("Hi there\n"));
  CHECK_FALSE(llmctl::byte_level_to_bytes("\xE4\xB8\xAD").has_value());  // 中 is not in the map
  CHECK_FALSE(llmctl::byte_level_to_bytes("\xC4").has_value());          // invalid UTF-8
}

// ---------------------------------------------------------------------------
// Merge loop
// ---------------------------------------------------------------------------

TEST_CASE("BPE applies merges by rank, leftmost first", "[cpu][tokenizer]") {
  // ids: 256 "ab", 257 "bc", 258 "abc", 259 "aa", 260 "aaaa"
  const auto vocab = byte_vocab({"ab", "bc", "abc", "aa", "aaaa"});
  SECTION("the lower rank wins over the earlier position") {
    const BpeModel m(vocab, {{"b", "c"}, {"a", "b"}, {"a", "bc"}}, false);
    CHECK(bpe_encode(m, "abc") == std::vector<int32_t>{258});
    CHECK(bpe_encode(m, "abcab") == std::vector<int32_t>{258, 256});
  }
  SECTION("a merge that would need an unmerged neighbour never applies") {
    const BpeModel m(vocab, {{"a", "b"}, {"b", "c"}}, false);
    CHECK(bpe_encode(m, "abc") == std::vector<int32_t>{256, byte_id('c')});
  }
  SECTION("equal ranks merge leftmost first") {
    const BpeModel m(vocab, {{"a", "a"}, {"aa", "aa"}}, false);
    CHECK(bpe_encode(m, "aaa") == std::vector<int32_t>{259, byte_id('a')});
    CHECK(bpe_encode(m, "aaaa") == std::vector<int32_t>{260});
    CHECK(bpe_encode(m, "aaaaa") == std::vector<int32_t>{260, byte_id('a')});
    CHECK(bpe_encode(m, "aaaaaa") == std::vector<int32_t>{260, 259});
  }
  SECTION("a repeated merge keeps its first rank") {
    const BpeModel m(vocab, {{"b", "c"}, {"a", "b"}, {"b", "c"}}, false);
    CHECK(bpe_encode(m, "abc") == std::vector<int32_t>{byte_id('a'), 257});
  }
  SECTION("single bytes and the empty piece") {
    const BpeModel m(vocab, {}, false);
    CHECK(bpe_encode(m, "").empty());
    CHECK(bpe_encode(m, "\xFF") == std::vector<int32_t>{255});
    CHECK(bpe_encode(m, "ab") == std::vector<int32_t>{byte_id('a'), byte_id('b')});
  }
}

TEST_CASE("BPE merges through non-tokens and falls back to bytes", "[cpu][tokenizer]") {
  // "xy" is not a token, but the merge "xy z" still leads to the token "xyz" (256).
  const auto vocab = byte_vocab({"xyz"});
  const BpeModel m(vocab, {{"x", "y"}, {"xy", "z"}}, false);
  CHECK(bpe_encode(m, "xyz") == std::vector<int32_t>{256});
  // A final "xy" is not a token: its bytes come out one by one.
  CHECK(bpe_encode(m, "xyx") == std::vector<int32_t>{byte_id('x'), byte_id('y'), byte_id('x')});

  // A vocabulary without a byte drops it, as llama.cpp does (no unknown token in gpt2).
  std::vector<std::optional<std::string>> partial = {std::string("a"), std::nullopt,
                                                     std::string("b")};
  const BpeModel p(partial, {}, false);
  CHECK(bpe_encode(p, "aqb") == std::vector<int32_t>{0, 2});
}

TEST_CASE("ignore_merges takes a whole-piece token first", "[cpu][tokenizer]") {
  const auto vocab = byte_vocab({"ab", "abc"});  // no merge leads to "abc"
  const BpeModel with(vocab, {{"a", "b"}}, true);
  const BpeModel without(vocab, {{"a", "b"}}, false);
  CHECK(bpe_encode(with, "abc") == std::vector<int32_t>{257});
  CHECK(bpe_encode(without, "abc") == std::vector<int32_t>{256, byte_id('c')});
  CHECK(bpe_encode(with, "abca") == std::vector<int32_t>{256, byte_id('c'), byte_id('a')});
}

// ---------------------------------------------------------------------------
// llama.cpp's gpt-2 vectors
// ---------------------------------------------------------------------------

TEST_CASE("gpt-2 vocabulary reproduces llama.cpp's test vectors", "[cpu][tokenizer][golden]") {
  const auto cases = llmctl::test::load_vocab_cases(kGpt2Vocab);
  const auto tok = llmctl::Tokenizer::from_file(llmctl::test::require_test_file(kGpt2Vocab));
  REQUIRE(cases.size() == 46);
  size_t passed = 0;
  for (const auto& c : cases) {
    INFO("input: \"" << llmctl::test::escape_for_message(c.text) << "\"");
    const std::vector<int32_t> ids = tok.encode(c.text, false);
    CHECK(ids == c.ids);
    CHECK(tok.decode(ids) == c.text);
    if (ids == c.ids) ++passed;
  }
  CHECK(passed == cases.size());
}

TEST_CASE("gpt-2 vocabulary metadata and special tokens", "[cpu][tokenizer]") {
  const auto tok = llmctl::Tokenizer::from_file(llmctl::test::require_test_file(kGpt2Vocab));
  CHECK(tok.kind() == "gpt2");
  CHECK(tok.n_vocab() == 50257);
  CHECK(tok.bos_id() == 50256);
  CHECK(tok.eos_id() == 50256);
  CHECK_FALSE(tok.add_bos_default());  // no add_bos_token key, pre "gpt-2": llama.cpp says no
  CHECK(tok.token_type(50256) == llmctl::TokenType::Control);
  CHECK(tok.piece(50256) == "<|endoftext|>");
  CHECK(tok.token_bytes(50256).empty());
  CHECK(tok.piece(220) == "\xC4\xA0");  // "Ġ"
  CHECK(tok.token_bytes(220) == " ");
  CHECK(tok.encode("Hello", true) == std::vector<int32_t>{50256, 15496});
  // Control token text is plain text.
  const auto ids = tok.encode("<|endoftext|>", false);
  CHECK(ids.size() > 1);
  CHECK(std::find(ids.begin(), ids.end(), 50256) == ids.end());
  CHECK(tok.decode(ids) == "<|endoftext|>");
  CHECK_THROWS_AS(tok.decode({50257}), llmctl::Error);
  CHECK_THROWS_AS(tok.piece(-1), llmctl::Error);
}

TEST_CASE("gpt-2 vocabulary keeps invalid UTF-8 bytes", "[cpu][tokenizer]") {
  const std::string path = llmctl::test::require_test_file(kGpt2Vocab);
  const auto impl = llmctl::make_gpt2_gguf_tokenizer(llmctl::GgufFile::open(path));
  for (const std::string& text :
       {std::string("ab\x80\x80 cd"), std::string("\xFF"), std::string(" \xE4\xB8"),
        std::string("\xC3\xA9\xC3"), std::string("x\xED\xA0\x80y"), std::string("\0\x01", 2)}) {
    INFO("input: \"" << llmctl::test::escape_for_message(text) << "\"");
    const auto ids = impl->encode(text, false);
    std::string bytes;
    for (int32_t id : ids) bytes += impl->token_bytes(id);
    CHECK(bytes == text);  // every original byte is encoded
    // decode() returns valid UTF-8: each stray byte becomes U+FFFD.
    const std::string decoded = impl->decode(ids);
    const bool all_valid = text == std::string("\0\x01", 2);
    CHECK((decoded.find("\xEF\xBF\xBD") != std::string::npos) != all_valid);
  }
}

// Speed is measured by benchmarks, not asserted here; this checks large inputs stay correct.
TEST_CASE("gpt-2 encoding round-trips 1 MB of mixed text and a 512 KB word", "[cpu][tokenizer]") {
  const auto tok = llmctl::Tokenizer::from_file(llmctl::test::require_test_file(kGpt2Vocab));
  const auto cases = llmctl::test::load_vocab_cases(kGpt2Vocab);
  std::string text;
  // Mixed prose, code-like runs, long words and multilingual text.
  const std::string extra =
      " supercalifragilisticexpialidocious_identifier_name(42); "
      "0123456789012345678901234567890 \t\t\n";
  while (text.size() < (1u << 20)) {
    for (const auto& c : cases) text += c.text;
    text += extra;
  }
  const auto ids = tok.encode(text, false);
  CHECK(ids.size() < text.size());
  CHECK(tok.decode(ids) == text);

  // One 512 KB word is one piece: the merge loop itself must stay O(n log n).
  std::string word;
  uint32_t state = 1;
  while (word.size() < (1u << 19)) {
    state = state * 1664525u + 1013904223u;
    word += static_cast<char>('a' + (state >> 24) % 26);
  }
  const auto word_ids = tok.encode(word, false);
  CHECK(word_ids.size() < word.size());
  CHECK(tok.decode(word_ids) == word);
}

// ---------------------------------------------------------------------------
// GGUF metadata rules, on a tiny vocabulary
// ---------------------------------------------------------------------------

TEST_CASE("gpt2 GGUF metadata: defaults as llama.cpp has them", "[cpu][tokenizer]") {
  namespace v = llmctl::gguf_value;
  SECTION("no pre, no bos/eos, no add_bos_token") {
    const auto t = tiny_tokenizer([](llmctl::GgufBuilder&) {});
    CHECK(t->bos_id() == 11);  // llama.cpp's default for gpt2 vocabularies
    CHECK(t->eos_id() == 11);
    CHECK_FALSE(t->add_bos_default());
    CHECK(t->encode("hello", false) == std::vector<int32_t>{257, byte_id('l'), byte_id('o')});
    CHECK(t->encode("hello", true).front() == 11);
    CHECK(t->pre_tokenizer == "default");  // llama.cpp's fallback, flagged for a warning
    CHECK(t->pre_tokenizer_defaulted);
  }
  SECTION("the Llama 3 pre-tokenizer adds BOS unless told otherwise") {
    const auto t = tiny_tokenizer([](llmctl::GgufBuilder& b) {
      b.set("tokenizer.ggml.pre", v::string("llama-bpe"));
      b.set("tokenizer.ggml.bos_token_id", v::u32(258));
    });
    CHECK(t->add_bos_default());
    CHECK(t->bos_id() == 258);
    const auto off = tiny_tokenizer([](llmctl::GgufBuilder& b) {
      b.set("tokenizer.ggml.pre", v::string("llama3"));
      b.set("tokenizer.ggml.add_bos_token", v::boolean(false));
    });
    CHECK_FALSE(off->add_bos_default());
  }
  SECTION("control tokens are never produced from text") {
    const auto t = tiny_tokenizer([](llmctl::GgufBuilder& b) {
      b.set("tokenizer.ggml.pre", v::string("llama3"));  // ignore_merges: whole-piece lookup
    });
    for (int32_t id : t->encode("<|end|>", false)) CHECK(id != 258);
    CHECK(t->token_bytes(258).empty());
  }
}

TEST_CASE("gpt2 GGUF metadata: bad values are clear errors", "[cpu][tokenizer]") {
  namespace v = llmctl::gguf_value;
  auto message = [](const std::function<void(llmctl::GgufBuilder&)>& edit) -> std::string {
    try {
      tiny_tokenizer(edit);
    } catch (const llmctl::FileError& e) {
      return e.what();
    }
    return "(no error)";
  };
  const std::string pre = message(
      [](llmctl::GgufBuilder& b) { b.set("tokenizer.ggml.pre", v::string("deepseek-koder")); });
  CHECK_THAT(pre, Catch::Contains("tiny.gguf") && Catch::Contains("'deepseek-koder'") &&
                      Catch::Contains("deepseek-coder"));  // the closest known name
  CHECK_THAT(
      message([](llmctl::GgufBuilder& b) { b.set("tokenizer.ggml.bos_token_id", v::u32(259)); }),
      Catch::Contains("bos_token_id") && Catch::Contains("259"));
  CHECK_THAT(message([](llmctl::GgufBuilder& b) {
               b.set("tokenizer.ggml.token_type", v::i32_array({1, 1}));
             }),
             Catch::Contains("token_type"));
  CHECK_THAT(
      message([](llmctl::GgufBuilder& b) { b.set("tokenizer.ggml.tokens", v::string_array({})); }),
      Catch::Contains("tokenizer.ggml.tokens"));
  try {
    llmctl::make_gpt2_gguf_tokenizer(llmctl::GgufFile::from_memory(
        tiny_gguf([](llmctl::GgufBuilder&) {}, /*with_merges=*/false), "tiny.gguf"));
    FAIL("no error for a gpt2 vocabulary without merges");
  } catch (const llmctl::FileError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("tokenizer.ggml.merges"));
  }
}
