// StreamDecoder and the UTF-8 helpers it rests on: streamed text equals decode(), and no
// push() ever returns part of a character.
#include <catch2/catch.hpp>

#include <random>

#include "core/error.h"
#include "support/test_data.h"
#include "support/vocab_cases.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

using llmctl::StreamDecoder;
using llmctl::Tokenizer;
using llmctl::utf8_incomplete_tail;
using llmctl::utf8_is_valid;
using llmctl::utf8_sanitize;
using llmctl::utf8_valid_char_len;
using llmctl::test::escape_for_message;
using llmctl::test::require_test_file;

namespace {

const char* const kReplacement = "\xEF\xBF\xBD";

// Streams ids one by one; checks every piece is valid UTF-8 and returns the concatenation.
std::string stream_all(const Tokenizer& tok, const std::vector<int32_t>& ids, int& invalid_pushes) {
  StreamDecoder dec(tok);
  std::string text;
  for (const int32_t id : ids) {
    const std::string part = dec.push(id);
    if (!utf8_is_valid(part)) ++invalid_pushes;
    text += part;
  }
  const std::string rest = dec.flush();
  if (!utf8_is_valid(rest)) ++invalid_pushes;
  return text + rest;
}

}  // namespace

// ---------------------------------------------------------------------------
// UTF-8 helpers
// ---------------------------------------------------------------------------

TEST_CASE("utf8_valid_char_len accepts strict UTF-8 only", "[cpu]") {
  CHECK(utf8_valid_char_len("a", 0) == 1);
  CHECK(utf8_valid_char_len("\xC3\xA4", 0) == 2);          // ä
  CHECK(utf8_valid_char_len("\xE2\x96\x81", 0) == 3);      // ▁
  CHECK(utf8_valid_char_len("\xF0\x9F\xA6\x99", 0) == 4);  // 🦙
  CHECK(utf8_valid_char_len("\xC3", 0) == 0);               // truncated
  CHECK(utf8_valid_char_len("\xC0\x80", 0) == 0);           // overlong NUL
  CHECK(utf8_valid_char_len("\xE0\x80\x80", 0) == 0);       // overlong
  CHECK(utf8_valid_char_len("\xED\xA0\x80", 0) == 0);       // surrogate
  CHECK(utf8_valid_char_len("\xF4\x90\x80\x80", 0) == 0);   // > U+10FFFF
  CHECK(utf8_valid_char_len("\x80", 0) == 0);               // lone continuation
  CHECK(utf8_valid_char_len("\xFF", 0) == 0);
  CHECK(utf8_valid_char_len("\xC3\x41", 0) == 0);           // bad continuation
  CHECK(utf8_valid_char_len("ab", 2) == 0);                 // past the end
}

TEST_CASE("utf8_sanitize replaces each stray byte with U+FFFD", "[cpu]") {
  CHECK(utf8_sanitize("h\xC3\xA4llo") == "h\xC3\xA4llo");
  CHECK(utf8_sanitize("\xE4\xBD" "A") == std::string(kReplacement) + kReplacement + "A");
  CHECK(utf8_sanitize("\xFF") == kReplacement);
  CHECK(utf8_sanitize(kReplacement) == kReplacement);
  CHECK(utf8_sanitize("").empty());
  CHECK(utf8_sanitize(std::string("a\0b", 3)) == std::string("a\0b", 3));
}

TEST_CASE("utf8_incomplete_tail finds a character still waiting for bytes", "[cpu]") {
  CHECK(utf8_incomplete_tail("") == 0);
  CHECK(utf8_incomplete_tail("abc") == 0);
  CHECK(utf8_incomplete_tail("a\xF0") == 1);
  CHECK(utf8_incomplete_tail("a\xF0\x9F") == 2);
  CHECK(utf8_incomplete_tail("a\xF0\x9F\xA6") == 3);
  CHECK(utf8_incomplete_tail("a\xF0\x9F\xA6\x99") == 0);  // complete
  CHECK(utf8_incomplete_tail("\xC3\xA4") == 0);
  CHECK(utf8_incomplete_tail("\xE4\xBD") == 2);
  CHECK(utf8_incomplete_tail("\x80\x80") == 0);           // continuation bytes without a lead
  CHECK(utf8_incomplete_tail("\xC3\xA4\x80") == 0);       // one continuation too many: invalid, not pending
}

// ---------------------------------------------------------------------------
// StreamDecoder
// ---------------------------------------------------------------------------

TEST_CASE("streaming equals decode() on every test input", "[cpu][golden]") {
  const auto cases = llmctl::test::load_vocab_cases("vocab/ggml-vocab-llama-spm.gguf");
  for (const char* rel : {"vocab/ggml-vocab-llama-spm.gguf", "models/llama2-tokenizer.model",
                          "models/stories260K.gguf"}) {
    const Tokenizer tok = Tokenizer::from_file(require_test_file(rel));
    for (const auto& c : cases) {
      for (const bool bos : {false, true}) {
        INFO(rel << " bos " << bos << " input " << escape_for_message(c.text));
        const auto ids = tok.encode(c.text, bos);
        int invalid = 0;
        CHECK(stream_all(tok, ids, invalid) == tok.decode(ids));
        CHECK(invalid == 0);
      }
    }
  }
}

TEST_CASE("streaming equals decode() on random id sequences", "[cpu]") {
  for (const char* rel : {"vocab/ggml-vocab-llama-spm.gguf", "models/stories260K.gguf"}) {
    const Tokenizer tok = Tokenizer::from_file(require_test_file(rel));
    std::mt19937 rng(42);
    // Mostly byte pieces (ids 3..258), so partial and invalid UTF-8 are common.
    std::uniform_int_distribution<int32_t> any(0, tok.n_vocab() - 1), bytes(0, 258);
    // Lead bytes, continuations, controls, <unk>, and "▁"-led pieces meet every rule.
    const int32_t edge[] = {0, 1, 2, 3 + 0x20, 3 + 0xC8, 3 + 0x97, 3 + 0xE4, 3 + 0xF0, 3 + 0x9F, 259, 260};
    int invalid = 0;
    for (int trial = 0; trial < 3000; ++trial) {
      std::vector<int32_t> ids(static_cast<size_t>(trial % 16));
      for (auto& id : ids) {
        const auto r = rng() % 4;
        id = r == 0 ? any(rng) : r == 1 ? edge[rng() % 11] : bytes(rng);
      }
      INFO(rel << " trial " << trial);
      const std::string whole = tok.decode(ids);  // never throws on valid ids
      CHECK(utf8_is_valid(whole));
      CHECK(stream_all(tok, ids, invalid) == whole);
    }
    CHECK(invalid == 0);
  }
}

TEST_CASE("a character split over byte tokens is held back until complete", "[cpu]") {
  const Tokenizer tok = Tokenizer::from_file(require_test_file("vocab/ggml-vocab-llama-spm.gguf"));
  // "🦙" (F0 9F A6 99) has no piece in Llama 2: it falls back to four byte tokens.
  const auto ids = tok.encode("\xF0\x9F\xA6\x99", false);
  REQUIRE(ids == std::vector<int32_t>{29871, 3 + 0xF0, 3 + 0x9F, 3 + 0xA6, 3 + 0x99});
  StreamDecoder dec(tok);
  CHECK(dec.push(ids[0]).empty());  // the dummy-prefix space is dropped
  CHECK(dec.push(ids[1]).empty());
  CHECK(dec.push(ids[2]).empty());
  CHECK(dec.push(ids[3]).empty());
  CHECK(dec.push(ids[4]) == "\xF0\x9F\xA6\x99");
  CHECK(dec.flush().empty());
}

TEST_CASE("invalid and unfinished bytes become U+FFFD, as in decode()", "[cpu]") {
  const Tokenizer tok = Tokenizer::from_file(require_test_file("vocab/ggml-vocab-llama-spm.gguf"));
  const int32_t e4 = 3 + 0xE4, bd = 3 + 0xBD, hello = 15043;  // hello = "▁Hello"
  {
    StreamDecoder dec(tok);
    CHECK(dec.push(e4).empty());
    CHECK(dec.push(bd).empty());
    CHECK(dec.push(hello) == std::string(kReplacement) + kReplacement + " Hello");
    CHECK(tok.decode({e4, bd, hello}) == std::string(kReplacement) + kReplacement + " Hello");
  }
  {
    StreamDecoder dec(tok);
    CHECK(dec.push(e4).empty());
    CHECK(dec.flush() == kReplacement);
    CHECK(dec.flush().empty());
  }
  {
    StreamDecoder dec(tok);
    CHECK(dec.push(3 + 0xBD) == kReplacement);  // a continuation byte alone is final at once
  }
  {
    // A control piece ends a byte run, as in sentencepiece: C8 </s> 97 is not "ȗ".
    StreamDecoder dec(tok);
    CHECK(dec.push(3 + 0xC8).empty());
    CHECK(dec.push(2) == kReplacement);
    CHECK(dec.push(3 + 0x97) == kReplacement);
    CHECK(tok.decode({3 + 0xC8, 2, 3 + 0x97}) == std::string(kReplacement) + kReplacement);
    CHECK(tok.decode({3 + 0xC8, 3 + 0x97}) == "\xC8\x97");
  }
}

TEST_CASE("the dummy-prefix space is dropped once, after control tokens", "[cpu]") {
  const Tokenizer tok = Tokenizer::from_file(require_test_file("vocab/ggml-vocab-llama-spm.gguf"));
  StreamDecoder dec(tok);
  CHECK(dec.push(1).empty());              // <s>
  CHECK(dec.push(15043) == "Hello");
  CHECK(dec.push(15043) == " Hello");
  CHECK(dec.push(2).empty());              // </s>
  CHECK(dec.flush().empty());
  StreamDecoder bad(tok);
  CHECK_THROWS_AS(bad.push(32000), llmctl::Error);
}
