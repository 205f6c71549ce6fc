#include "tokenizer/unicode.h"

#include <algorithm>

namespace llmctl {

namespace {

uint8_t byte_at(std::string_view text, size_t pos) { return static_cast<uint8_t>(text[pos]); }

bool is_continuation(uint8_t b) { return (b & 0xC0u) == 0x80u; }

bool in_ranges(const unicode_tables::CodePointRange* ranges, size_t count, char32_t cp) {
  const unicode_tables::CodePointRange* end = ranges + count;
  // First range whose last >= cp; cp is inside when that range also starts at or before cp.
  const auto* it = std::lower_bound(
      ranges, end, cp,
      [](const unicode_tables::CodePointRange& r, char32_t value) { return r.last < value; });
  return it != end && it->first <= cp;
}

}  // namespace

Utf8Unit decode_utf8(std::string_view text, size_t pos) {
  const uint8_t b0 = byte_at(text, pos);
  if (b0 < 0x80u) return {b0, 1, true};
  const Utf8Unit invalid{kReplacementChar, 1, false};

  uint32_t size = 0;
  char32_t cp = 0;
  char32_t min_cp = 0;  // smallest value this length may encode (rejects overlong forms)
  if ((b0 & 0xE0u) == 0xC0u) {
    size = 2, cp = b0 & 0x1Fu, min_cp = 0x80;
  } else if ((b0 & 0xF0u) == 0xE0u) {
    size = 3, cp = b0 & 0x0Fu, min_cp = 0x800;
  } else if ((b0 & 0xF8u) == 0xF0u) {
    size = 4, cp = b0 & 0x07u, min_cp = 0x10000;
  } else {
    return invalid;  // continuation byte or 0xF8..0xFF
  }
  if (text.size() - pos < size) return invalid;
  for (uint32_t i = 1; i < size; ++i) {
    const uint8_t b = byte_at(text, pos + i);
    if (!is_continuation(b)) return invalid;
    cp = (cp << 6) | (b & 0x3Fu);
  }
  if (cp < min_cp || cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) return invalid;
  return {cp, size, true};
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) cp = kReplacementChar;
  auto put = [&out](char32_t byte) {
    out.push_back(static_cast<char>(static_cast<uint8_t>(byte)));
  };
  if (cp < 0x80) {
    put(cp);
  } else if (cp < 0x800) {
    put(0xC0 | (cp >> 6));
    put(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    put(0xE0 | (cp >> 12));
    put(0x80 | ((cp >> 6) & 0x3F));
    put(0x80 | (cp & 0x3F));
  } else {
    put(0xF0 | (cp >> 18));
    put(0x80 | ((cp >> 12) & 0x3F));
    put(0x80 | ((cp >> 6) & 0x3F));
    put(0x80 | (cp & 0x3F));
  }
}

bool is_letter(char32_t cp) {
  if (cp < 0x80) return (cp | 0x20u) >= 'a' && (cp | 0x20u) <= 'z';
  return in_ranges(unicode_tables::kLetterRanges, unicode_tables::kLetterRangeCount, cp);
}

bool is_number(char32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  return in_ranges(unicode_tables::kNumberRanges, unicode_tables::kNumberRangeCount, cp);
}

bool is_white_space(char32_t cp) {
  if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D);
  return in_ranges(unicode_tables::kWhiteSpaceRanges, unicode_tables::kWhiteSpaceRangeCount, cp);
}

CodePointClass classify(char32_t cp) {
  // The three sets are disjoint, so the order of the tests does not matter.
  if (is_letter(cp)) return CodePointClass::Letter;
  if (is_number(cp)) return CodePointClass::Number;
  if (is_white_space(cp)) return CodePointClass::Space;
  return CodePointClass::Other;
}

const char* unicode_tables_version() { return unicode_tables::kUnicodeVersion; }

}  // namespace llmctl
