#include "tokenizer/utf8.h"

#include <cstdint>

namespace llmctl {

namespace {

bool is_continuation(uint8_t b) { return (b & 0xC0U) == 0x80U; }

// Bytes a lead byte announces, or 0 for a continuation byte or an impossible lead.
size_t announced_len(uint8_t b) {
  if (b < 0x80U) return 1;
  if ((b & 0xE0U) == 0xC0U) return 2;
  if ((b & 0xF0U) == 0xE0U) return 3;
  if ((b & 0xF8U) == 0xF0U) return 4;
  return 0;
}

}  // namespace

size_t utf8_valid_char_len(std::string_view s, size_t pos) {
  if (pos >= s.size()) return 0;
  const auto at = [&](size_t i) { return static_cast<uint8_t>(s[pos + i]); };
  const uint8_t b0 = at(0);
  const size_t n = announced_len(b0);
  if (n == 0 || s.size() - pos < n) return 0;
  if (n == 1) return 1;
  uint32_t cp = b0 & (0xFFU >> (n + 1));
  for (size_t i = 1; i < n; ++i) {
    if (!is_continuation(at(i))) return 0;
    cp = (cp << 6) | (at(i) & 0x3FU);
  }
  static constexpr uint32_t kMinForLen[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMinForLen[n]) return 0;                 // overlong
  if (cp >= 0xD800 && cp <= 0xDFFF) return 0;      // surrogate
  if (cp > 0x10FFFF) return 0;
  return n;
}

bool utf8_is_valid(std::string_view s) {
  for (size_t pos = 0; pos < s.size();) {
    const size_t n = utf8_valid_char_len(s, pos);
    if (n == 0) return false;
    pos += n;
  }
  return true;
}

std::string utf8_sanitize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) {
    const size_t n = utf8_valid_char_len(s, pos);
    if (n == 0) {
      out += kUtf8Replacement;
      ++pos;
    } else {
      out.append(s, pos, n);
      pos += n;
    }
  }
  return out;
}

size_t utf8_incomplete_tail(std::string_view s) {
  // Walk back over at most 3 continuation bytes to the lead byte that owns them.
  const size_t limit = s.size() < 4 ? s.size() : 4;
  for (size_t k = 1; k <= limit; ++k) {
    const auto b = static_cast<uint8_t>(s[s.size() - k]);
    if (is_continuation(b)) continue;
    const size_t n = announced_len(b);
    // A lead byte whose character would need more bytes than are present: hold it back.
    // ASCII or a complete (or impossible) sequence: nothing to hold.
    return (n > 1 && k < n) ? k : 0;
  }
  return 0;
}

}  // namespace llmctl
