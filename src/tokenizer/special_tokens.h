#pragma once
// Special-token partitioning of input text, as llama.cpp's tokenizer_st_partition does it
// (llama-vocab.cpp): before a text is encoded with parse_special, every occurrence of the text
// of a CONTROL, USER_DEFINED or UNKNOWN token becomes that token, and only the text between
// matches goes to the vocabulary's ordinary encoder.
//
// Matching order (llama.cpp's): the special tokens are taken longest text first; each one
// splits every remaining text fragment at all of its non-overlapping occurrences, left to
// right, before the next (shorter) token is looked for. So "<|im_start|>" wins over a
// hypothetical "<|im" wherever they overlap. Ties in length: the lower id first (llama.cpp
// leaves that order unspecified). Token attributes LSTRIP/RSTRIP (llama.cpp sets them by model
// name only, e.g. for phi-3) are not applied: surrounding whitespace stays text.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace llmctl {

// One piece of the partitioned input: a special token (id >= 0) or a run of plain text
// (id == -1, text non-empty). Either way `text` is a view into the input, so a caller can
// tell where each fragment lies.
struct TextFragment {
  int32_t id = -1;
  std::string_view text;
};

class SpecialTokenSplitter {
 public:
  SpecialTokenSplitter() = default;
  // (id, text) of every special token; empty texts are ignored (they cannot be matched).
  explicit SpecialTokenSplitter(std::vector<std::pair<int32_t, std::string>> specials);

  // The fragments of `text`, in order. Text fragments are never empty; concatenating every
  // fragment's text (a token's text for token fragments) gives `text` back.
  std::vector<TextFragment> split(std::string_view text) const;

  // The id of the special token whose text is exactly `text` (lowest id on duplicates), -1
  // when none.
  int32_t find(std::string_view text) const;

  size_t size() const { return specials_.size(); }

 private:
  std::vector<std::pair<int32_t, std::string>> specials_;  // longest text first
};

}  // namespace llmctl
