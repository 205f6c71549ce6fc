#pragma once
// Minimal UTF-8 helpers for detokenization (the pre-tokenizer's Unicode tables live in unicode*).
// "Valid" is strict UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF.

#include <cstddef>
#include <string>
#include <string_view>

namespace llmctl {

// U+FFFD REPLACEMENT CHARACTER, what an invalid byte decodes to.
inline constexpr std::string_view kUtf8Replacement = "\xEF\xBF\xBD";

// Length (1..4) of the valid character starting at s[pos], or 0 when none starts there
// (bad lead byte, bad continuation, truncated, overlong, surrogate, > U+10FFFF).
size_t utf8_valid_char_len(std::string_view s, size_t pos);

bool utf8_is_valid(std::string_view s);

// Replaces every byte that does not start a valid character with U+FFFD, one per byte.
// This is how sentencepiece renders invalid byte-fallback sequences.
std::string utf8_sanitize(std::string_view s);

// Number of trailing bytes (0..3) that form the beginning of a character still waiting for
// continuation bytes: a lead byte followed by fewer continuation bytes than it announces.
// Everything before them can be emitted without splitting a character.
size_t utf8_incomplete_tail(std::string_view s);

}  // namespace llmctl
