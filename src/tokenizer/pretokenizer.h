#pragma once
// Pre-tokenizers of byte-level BPE vocabularies (tokenizer.ggml.pre): split text into the
// pieces that BPE merges never cross. Every name llama.cpp accepts is a row of
// pre_tokenizer_table.h; its regex list runs through PCRE2 (regex_split.h), compiled once per
// list and shared by every tokenizer and thread.
//
// Invalid UTF-8 never fails: each bad byte is a unit of its own, classed like U+FFFD
// (neither letter, number nor space), and stays in its piece as the original byte.

#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/pre_tokenizer_table.h"
#include "tokenizer/regex_split.h"

namespace llmctl {

// The row for a tokenizer.ggml.pre value. Throws Error for an unknown name, listing the
// closest known names (edit distance) and where to find them all.
const PreTokenizerSpec& find_pre_tokenizer(std::string_view name);

// Which pre-tokenizer a vocabulary uses: `override_name` when not empty, else the file's
// value, else llama.cpp's "default" with `defaulted` set (the caller warns, as llama.cpp
// does: generation quality degrades with the wrong splits).
struct PreTokenizerChoice {
  const PreTokenizerSpec* spec = nullptr;
  bool defaulted = false;
};
PreTokenizerChoice choose_pre_tokenizer(const std::string* file_value,
                                        std::string_view override_name);

// Every accepted tokenizer.ggml.pre value, in table order (for --pre-tokenizer help).
std::vector<std::string> known_pre_tokenizer_names();

// The compiled regex list of a row; compiled on first use and kept for the process.
const RegexSplitter& pre_tokenizer_splitter(const PreTokenizerSpec& spec);

// The compiled splitter of any regex list (a tokenizer.json's pre_tokenizer), cached as above
// by the patterns themselves.
const RegexSplitter& regex_splitter_for(const std::vector<std::string>& patterns);

// Splits text into consecutive, non-empty pieces that concatenate back to `text`.
// The views point into `text`.
std::vector<std::string_view> pre_tokenize(const PreTokenizerSpec& spec, std::string_view text);

}  // namespace llmctl
