#pragma once
// Internal interface behind Tokenizer (not included outside src/tokenizer/).

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/special_tokens.h"
#include "tokenizer/text_normalizer.h"
#include "tokenizer/tokenizer.h"

namespace llmctl {

class TokenizerImpl {
 public:
  virtual ~TokenizerImpl() = default;
  virtual std::vector<int32_t> encode(std::string_view text, bool add_bos) const = 0;
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  virtual std::string piece(int32_t id) const = 0;
  virtual std::string token_bytes(int32_t id) const = 0;
  virtual int32_t n_vocab() const = 0;
  virtual int32_t bos_id() const = 0;
  virtual int32_t eos_id() const = 0;
  virtual bool add_bos_default() const = 0;
  virtual TokenType token_type(int32_t id) const = 0;
  // Whether decode() drops one leading space (sentencepiece dummy prefix).
  virtual bool strips_leading_space() const = 0;

  std::string kind;
  std::string source;
  // Byte-level BPE only: the tokenizer.ggml.pre row in use, and whether the file had none
  // (llama.cpp's "default" then; callers warn).
  std::string pre_tokenizer;
  bool pre_tokenizer_defaulted = false;
  // The special tokens for encode(..., parse_special); filled by the Tokenizer facade.
  SpecialTokenSplitter specials;
};

// Factories, one per implementation file.
std::unique_ptr<TokenizerImpl> make_sentencepiece_tokenizer(const std::string& path);
std::unique_ptr<TokenizerImpl> make_llama_gguf_tokenizer(const GgufFile& file);
class RegexSplitter;
// A byte-level BPE vocabulary however it is stored (GGUF, tokenizer.json): pieces as stored
// ("Ġthe"), one type per piece, merges as "left right" in rank order, the splitter that
// pre-tokenizes (kept by reference: a process-lifetime cache owns it, pretokenizer.h).
std::unique_ptr<TokenizerImpl> make_byte_level_bpe_tokenizer(std::vector<std::string> pieces,
                                                             std::vector<TokenType> types,
                                                             const std::vector<std::string_view>& merges,
                                                             const RegexSplitter& splitter,
                                                             bool ignore_merges, int32_t bos,
                                                             int32_t eos, bool add_bos,
                                                             TextNormalizer normalizer = {});
// A SentencePiece-style BPE over characters (tokenizer.json with byte_fallback: Llama 2,
// Gemma): pieces are text with "▁" for spaces, "<0xAB>" Byte tokens are the fallback for
// characters without a token; no pre-tokenizer, the normalizer makes the spaces "▁".
std::unique_ptr<TokenizerImpl> make_char_bpe_tokenizer(std::vector<std::string> pieces,
                                                       std::vector<TokenType> types,
                                                       const std::vector<std::string_view>& merges,
                                                       TextNormalizer normalizer, int32_t bos,
                                                       int32_t eos, bool add_bos,
                                                       bool strips_leading_space);
// A Hugging Face tokenizer.json with a byte-level BPE model (hf_tokenizer_json.cpp).
std::unique_ptr<TokenizerImpl> make_hf_json_tokenizer(const std::string& path);
// pre_tokenizer: a tokenizer.ggml.pre name that replaces the file's; empty keeps the file's.
std::unique_ptr<TokenizerImpl> make_gpt2_gguf_tokenizer(const GgufFile& file,
                                                        std::string_view pre_tokenizer = {});

}  // namespace llmctl
