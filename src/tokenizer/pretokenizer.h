#pragma once
// Pre-tokenizers of byte-level BPE vocabularies (tokenizer.ggml.pre): split text into the
// pieces that BPE merges never cross. Hand-written matchers over code points that give the
// same splits as these patterns under a backtracking regex engine (Python `regex`, HF
// tokenizers, tiktoken); tests/fixtures/pretokenizer_cases.json holds the proof:
//
//   Gpt2    's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   Llama3  (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//           ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// Invalid UTF-8 never fails: each bad byte is a unit of its own, classed like U+FFFD
// (neither letter, number nor space), and stays in its piece as the original byte.

#include <string>
#include <string_view>
#include <vector>

namespace llmctl {

enum class PreTokenizer { Gpt2, Llama3 };

// Maps a tokenizer.ggml.pre value: "default", "gpt-2", "gpt2" and "" (absent) -> Gpt2;
// "llama3", "llama-bpe", "llama-v3" -> Llama3. Throws Error listing the supported values.
PreTokenizer pre_tokenizer_from_name(std::string_view name);
const char* pre_tokenizer_name(PreTokenizer kind);  // "gpt2" or "llama3"
// The accepted tokenizer.ggml.pre values, comma-separated, for messages.
std::string supported_pre_tokenizer_names();

// Splits text into consecutive, non-empty pieces that concatenate back to `text`.
// The views point into `text`.
std::vector<std::string_view> pre_tokenize(PreTokenizer kind, std::string_view text);

}  // namespace llmctl
