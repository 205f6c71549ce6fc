#pragma once
// The vocabulary of a loaded model, for every subcommand that runs one (run, eval, rope-probe):
// the GGUF's own, or the tokenizer file of a Hugging Face directory, with the
// --pre-tokenizer override. Warns once on stderr when a byte-level BPE file names no
// pre-tokenizer (llama.cpp's "default" is used, and splits may differ from the model's).

#include <optional>
#include <string>

#include "model/model_loader.h"
#include "tokenizer/tokenizer.h"

namespace llmctl::cli {

// nullopt when the model has no vocabulary (a Hugging Face directory without a tokenizer file).
std::optional<Tokenizer> open_model_tokenizer(const LoadedModel& m, const TokenizerOptions& opt);

// A file given to tokenize (-m MODEL or --tokenizer FILE), with the same override and warning.
Tokenizer open_tokenizer_file(const std::string& path, const TokenizerOptions& opt);

// The --pre-tokenizer option's help text (one place for every subcommand).
inline constexpr const char* kPreTokenizerHelp =
    "Byte-level BPE pre-tokenizer to use instead of the file's tokenizer.ggml.pre (a name "
    "llama.cpp accepts: llama3, qwen2, smollm, deepseek-coder, ...)";

}  // namespace llmctl::cli
