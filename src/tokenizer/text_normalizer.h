#pragma once
// A Hugging Face tokenizer.json normalizer: steps applied in order to the text between
// special tokens, before pre-tokenization (tokenizers' `normalizers`). Supported steps:
//   NFC, NFD, NFKC, NFKD   Unicode normalization (utf8proc); invalid UTF-8 bytes pass through
//   Prepend(s)             s before a non-empty text (SentencePiece's dummy prefix "▁")
//   Replace(a, b)          every a by b, left to right (" " -> "▁" in Llama 2 and Gemma)
//   PrefixSpace            a space before a non-empty text that does not start with one
//                          (ByteLevel's add_prefix_space, when ByteLevel is the first pre-tokenizer)

#include <string>
#include <string_view>
#include <vector>

namespace llmctl {

class TextNormalizer {
 public:
  enum class Kind { Nfc, Nfd, Nfkc, Nfkd, Prepend, Replace, PrefixSpace };
  struct Step {
    Kind kind;
    std::string text;         // Prepend: what is prepended; Replace: the pattern
    std::string replacement;  // Replace only
  };

  TextNormalizer() = default;
  explicit TextNormalizer(std::vector<Step> steps) : steps_(std::move(steps)) {}

  bool empty() const { return steps_.empty(); }
  const std::vector<Step>& steps() const { return steps_; }
  std::string apply(std::string_view text) const;

 private:
  std::vector<Step> steps_;
};

// One normalization form applied to text; maximal runs of valid UTF-8 are normalized, invalid
// bytes are kept as they are.
std::string unicode_normalize(std::string_view text, TextNormalizer::Kind form);

}  // namespace llmctl
