// open_model_tokenizer (model_tokenizer.h).
#include "cli/model_tokenizer.h"

#include <fmt/format.h>

#include <cstdio>

namespace llmctl::cli {

namespace {

Tokenizer warn_if_defaulted(Tokenizer tok) {
  if (tok.pre_tokenizer_defaulted())
    fmt::print(stderr,
               "llmctl: warning: {}: the vocabulary names no pre-tokenizer "
               "(tokenizer.ggml.pre); using llama.cpp's 'default' (GPT-2 splitting). If the "
               "model's own differs, pass --pre-tokenizer NAME\n",
               tok.source());
  return tok;
}

}  // namespace

std::optional<Tokenizer> open_model_tokenizer(const LoadedModel& m, const TokenizerOptions& opt) {
  if (m.gguf) return warn_if_defaulted(Tokenizer::from_gguf(*m.gguf, opt));
  if (!m.tokenizer_path.empty()) return warn_if_defaulted(Tokenizer::from_file(m.tokenizer_path, opt));
  return std::nullopt;
}

Tokenizer open_tokenizer_file(const std::string& path, const TokenizerOptions& opt) {
  return warn_if_defaulted(Tokenizer::from_file(path, opt));
}

}  // namespace llmctl::cli
