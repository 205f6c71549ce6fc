#pragma once
// llama.cpp's tokenizer test vectors (models/ggml-vocab-NAME.gguf.inp / .out), parsed the way
// llama.cpp's tests/test-tokenizer-0 reads them.
//
// .inp: every input is written followed by "\n__ggml_vocab_test__\n", so the file is split
//       on that separator and the empty remainder after the last one is dropped. Inputs may
//       be empty, whitespace-only, contain newlines and any Unicode: compare byte for byte.
// .out: one line per input with the expected ids (no BOS), each written as " ID"; an input
//       that encodes to nothing has an empty line.

#include <cstdint>
#include <string>
#include <vector>

namespace llmctl::test {

struct VocabCase {
  std::string text;
  std::vector<int32_t> ids;
};

// Parses the two file contents; throws std::runtime_error when they disagree in count or an
// id is not a number.
std::vector<VocabCase> parse_vocab_cases(const std::string& inp, const std::string& out);

// Reads "vocab/NAME.inp" and "vocab/NAME.out" beside a vocabulary file given relative to the
// test data directory, e.g. load_vocab_cases("vocab/ggml-vocab-llama-spm.gguf"). Skips the
// test (exit 77) when the data is missing, like require_test_file().
std::vector<VocabCase> load_vocab_cases(const std::string& vocab_rel);

// The input as a C-escaped string for test messages ("\n", "\t", non-ASCII kept as is).
std::string escape_for_message(const std::string& text);

}  // namespace llmctl::test
