#pragma once
// A list of regexes that splits text, with llama.cpp's unicode_regex_split semantics: the
// first regex splits the whole text; each next one splits every piece the previous made.
// Within a piece, every match is a piece and so is the text between two matches (and before
// the first, after the last); empty pieces are dropped, so zero-width matches only cut.
// Each piece is matched as a subject of its own: ^, $, \b and lookarounds stop at its ends.
//
// PCRE2 (8-bit, UTF + UCP: \s \d \w and \p{..} are Unicode), JIT-compiled once at
// construction. One RegexSplitter may be used from several threads at once.
//
// Invalid UTF-8 never fails: each byte that starts no valid character is matched as U+FFFD
// (neither letter, number nor space) and stays in its piece as the original byte.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace llmctl {

class RegexSplitter {
 public:
  // Throws Error naming the pattern and PCRE2's message at the offset when one does not
  // compile.
  explicit RegexSplitter(std::vector<std::string> patterns);
  ~RegexSplitter();
  RegexSplitter(RegexSplitter&&) noexcept;
  RegexSplitter& operator=(RegexSplitter&&) noexcept;

  // Consecutive, non-empty pieces that concatenate back to `text`; the views point into it.
  std::vector<std::string_view> split(std::string_view text) const;

  const std::vector<std::string>& patterns() const { return patterns_; }

 private:
  struct Compiled;
  std::vector<std::string> patterns_;
  std::vector<std::unique_ptr<Compiled>> compiled_;
};

}  // namespace llmctl
