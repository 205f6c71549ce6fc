// UTF-8 decoding with invalid-byte handling, and the generated code point class tables.

#include <catch2/catch.hpp>
#include <string>

#include "tokenizer/unicode.h"

using llmctl::CodePointClass;
using llmctl::decode_utf8;

namespace {

// Decodes the whole string, one unit at a time.
std::vector<llmctl::Utf8Unit> decode_all(const std::string& text) {
  std::vector<llmctl::Utf8Unit> units;
  for (size_t pos = 0; pos < text.size();) {
    units.push_back(decode_utf8(text, pos));
    pos += units.back().size;
  }
  return units;
}

}  // namespace

TEST_CASE("decode_utf8 decodes valid sequences of every length", "[cpu][tokenizer]") {
  const auto units = decode_all("a\xC3\xA9\xE4\xB8\xAD\xF0\x9F\xA6\x99");  // a é 中 🦙
  REQUIRE(units.size() == 4);
  CHECK(units[0].cp == U'a');
  CHECK(units[1].cp == U'\u00E9');
  CHECK(units[1].size == 2);
  CHECK(units[2].cp == U'\u4E2D');
  CHECK(units[2].size == 3);
  CHECK(units[3].cp == U'\U0001F999');
  CHECK(units[3].size == 4);
  for (const auto& u : units) CHECK(u.valid);
  // The extremes of each length.
  CHECK(decode_utf8("\x7F", 0).cp == 0x7F);
  CHECK(decode_utf8("\xC2\x80", 0).cp == 0x80);
  CHECK(decode_utf8("\xEF\xBF\xBF", 0).cp == 0xFFFF);
  CHECK(decode_utf8("\xF4\x8F\xBF\xBF", 0).cp == 0x10FFFF);
  CHECK(decode_utf8(std::string("\0", 1), 0).cp == 0);
}

TEST_CASE("decode_utf8 turns each invalid byte into one U+FFFD unit", "[cpu][tokenizer]") {
  const char* const bad[] = {
      "\x80",              // stray continuation
      "\xBF",              // stray continuation
      "\xC0\xAF",          // overlong '/'
      "\xC1\xBF",          // overlong
      "\xE0\x80\xAF",      // overlong (3 bytes)
      "\xF0\x80\x80\xAF",  // overlong (4 bytes)
      "\xED\xA0\x80",      // surrogate U+D800
      "\xED\xBF\xBF",      // surrogate U+DFFF
      "\xF4\x90\x80\x80",  // U+110000
      "\xF8\x88\x80\x80",  // 5-byte form
      "\xFF",              //
      "\xC3",              // truncated at the end
      "\xE4\xB8",          // truncated at the end
      "\xE4\x41\x42",      // truncated by an ASCII byte
  };
  for (const char* text : bad) {
    INFO("input bytes: " << text);
    const llmctl::Utf8Unit first = decode_utf8(text, 0);
    CHECK_FALSE(first.valid);
    CHECK(first.size == 1);
    CHECK(first.cp == llmctl::kReplacementChar);
  }
  // The bytes after a bad one are decoded afresh: "\xE4" then "AB".
  const auto units = decode_all(
      "\xE4"
      "AB");
  REQUIRE(units.size() == 3);
  CHECK(units[1].cp == U'A');
  CHECK(units[1].valid);
}

TEST_CASE("append_utf8 inverts decode_utf8", "[cpu][tokenizer]") {
  for (char32_t cp = 0; cp <= llmctl::kMaxCodePoint; cp += (cp < 0x3000 ? 1 : 97)) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    std::string s;
    llmctl::append_utf8(s, cp);
    const llmctl::Utf8Unit u = decode_utf8(s, 0);
    REQUIRE(u.valid);
    REQUIRE(u.cp == cp);
    REQUIRE(u.size == s.size());
  }
  std::string s;
  llmctl::append_utf8(s, 0xD800);  // not encodable: replaced
  CHECK(s == "\xEF\xBF\xBD");
}

TEST_CASE("Code point classes follow Unicode general categories", "[cpu][tokenizer]") {
  // Letters: L* of any script, including modifier letters (Lm) and other letters (Lo).
  for (char32_t cp : {U'A', U'z', U'\u00E9', U'\u00AA', U'\u02B0', U'\u0416', U'\u05D0', U'\u0627',
                      U'\u4E2D', U'\u3042', U'\uAC00', U'\U00020000'})
    CHECK(llmctl::classify(cp) == CodePointClass::Letter);
  // Numbers: Nd, Nl and No.
  for (char32_t cp :
       {U'0', U'9', U'\u0663', U'\u00BD', U'\u00B2', U'\u216B', U'\u2460', U'\U0001D7CE'})
    CHECK(llmctl::classify(cp) == CodePointClass::Number);
  // White_Space, including NEL, NBSP, the line/paragraph separators and ideographic space.
  for (char32_t cp : {U' ', U'\t', U'\n', U'\v', U'\f', U'\r', U'\u0085', U'\u00A0', U'\u1680',
                      U'\u2000', U'\u200A', U'\u2028', U'\u2029', U'\u202F', U'\u205F', U'\u3000'})
    CHECK(llmctl::classify(cp) == CodePointClass::Space);
  // Everything else: punctuation, symbols, marks, controls that are not White_Space,
  // zero-width characters, emoji, unassigned and private-use code points.
  for (char32_t cp :
       {U'!', U'\'', U'~', U'\u0000', U'\u001C', U'\u001F', U'\u0301', U'\u0E48', U'\u200B',
        U'\u200D', U'\uFE0F', U'\uFFFD', U'\U0001F999', U'\uE000', U'\U0010FFFF', char32_t{0x0378}})
    CHECK(llmctl::classify(cp) == CodePointClass::Other);
}

TEST_CASE("Generated tables are sorted, disjoint and agree with the ASCII fast paths",
          "[cpu][tokenizer]") {
  namespace t = llmctl::unicode_tables;
  struct Table {
    const t::CodePointRange* ranges;
    size_t count;
  };
  for (Table table : {Table{t::kLetterRanges, t::kLetterRangeCount},
                      Table{t::kNumberRanges, t::kNumberRangeCount},
                      Table{t::kWhiteSpaceRanges, t::kWhiteSpaceRangeCount}}) {
    REQUIRE(table.count > 0);
    for (size_t i = 0; i < table.count; ++i) {
      REQUIRE(table.ranges[i].first <= table.ranges[i].last);
      REQUIRE(table.ranges[i].last <= llmctl::kMaxCodePoint);
      // Adjacent ranges would have been merged by the generator: a gap of at least one.
      if (i > 0) REQUIRE(table.ranges[i - 1].last + 1 < table.ranges[i].first);
    }
  }
  CHECK(std::string(llmctl::unicode_tables_version()) == t::kUnicodeVersion);
  // The ASCII fast paths in unicode.cpp must say what the tables say.
  auto in_table = [](const t::CodePointRange* r, size_t n, char32_t cp) {
    for (size_t i = 0; i < n; ++i)
      if (r[i].first <= cp && cp <= r[i].last) return true;
    return false;
  };
  for (char32_t cp = 0; cp < 0x80; ++cp) {
    INFO("U+" << static_cast<uint32_t>(cp));
    CHECK(llmctl::is_letter(cp) == in_table(t::kLetterRanges, t::kLetterRangeCount, cp));
    CHECK(llmctl::is_number(cp) == in_table(t::kNumberRanges, t::kNumberRangeCount, cp));
    CHECK(llmctl::is_white_space(cp) ==
          in_table(t::kWhiteSpaceRanges, t::kWhiteSpaceRangeCount, cp));
  }
  // The binary search agrees with a linear scan everywhere (sampled).
  for (char32_t cp = 0x80; cp <= llmctl::kMaxCodePoint; cp += 13) {
    REQUIRE(llmctl::is_letter(cp) == in_table(t::kLetterRanges, t::kLetterRangeCount, cp));
    REQUIRE(llmctl::is_number(cp) == in_table(t::kNumberRanges, t::kNumberRangeCount, cp));
  }
}
