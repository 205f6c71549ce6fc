#pragma once
// One Tokenizer for every vocabulary kind llmctl reads. sentencepiece types never appear here.
// CONTRACT (used by cli/ and, later, model/ and the run loop): keep the public API stable.
//
// Kinds:
//   "sentencepiece"  a sentencepiece .model file, through libsentencepiece
//   "llama"          GGUF tokenizer.ggml.model = llama (pieces/scores/types; same ids as sentencepiece)
//   "gpt2"           GGUF tokenizer.ggml.model = gpt2 (byte-level BPE with merges and a pre-tokenizer)

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/special_tokens.h"

namespace llmctl {

class GgufFile;
class TokenizerImpl;

// ggml / llama.cpp token types (tokenizer.ggml.token_type), equal to sentencepiece's piece types.
enum class TokenType : int32_t {
  Undefined = 0, Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6,
};

// How a vocabulary is loaded. Default-constructed: exactly as the file says.
struct TokenizerOptions {
  // A tokenizer.ggml.pre name (known_pre_tokenizer_names() in pretokenizer.h) used instead
  // of the file's; empty keeps the file's. Only byte-level BPE (gpt2) vocabularies have one.
  std::string pre_tokenizer;
};

class Tokenizer {
 public:
  // Opens a .model (sentencepiece protobuf), .gguf or tokenizer.json file, told apart by
  // content, not name.
  static Tokenizer from_file(const std::string& path);
  static Tokenizer from_file(const std::string& path, const TokenizerOptions& options);
  static Tokenizer from_gguf(const GgufFile& file);
  static Tokenizer from_gguf(const GgufFile& file, const TokenizerOptions& options);
  static Tokenizer from_sentencepiece(const std::string& path);
  // A Hugging Face tokenizer.json with a byte-level BPE model (kind "gpt2"); EOS, and BOS
  // when no post_processor template names one, from tokenizer_config.json beside it.
  // Unsupported parts (normalizers, byte_fallback, other models) are errors that name them.
  static Tokenizer from_hf_tokenizer_json(const std::string& path);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Text -> ids. With add_bos, the BOS id is prepended when the vocabulary has one.
  // Special/control token text in the input is NOT parsed as special (treated as plain text).
  std::vector<int32_t> encode(std::string_view text, bool add_bos) const;
  // As above; with parse_special, the text of every CONTROL, USER_DEFINED and UNKNOWN token
  // in the input becomes that token's id (llama.cpp's parse_special: longest token first, see
  // special_tokens.h), and each run of text between them is encoded on its own as by
  // encode(run, false). For sentencepiece kinds that means every run gets the dummy-prefix
  // space again, as llama.cpp does after a special token (when the vocabulary adds the prefix
  // at all): "<s>[INST]" -> [<s>, ▁[, INST, ]]. BOS from add_bos is not de-duplicated against
  // a "<s>" in the text (llama.cpp neither). Without parse_special: the 2-argument encode(),
  // unchanged (llama.cpp splits USER_DEFINED tokens out even then; for sentencepiece kinds
  // libsentencepiece matches them itself, for gpt2 they stay BPE text).
  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special) const;
  // The input as encode(..., parse_special=true) partitions it: special-token matches (id >= 0)
  // and the runs of text between them (special_tokens.h). Lets a caller keep parts of a text
  // from being parsed (chat.h: message contents) and encode the rest the same way.
  std::vector<TextFragment> split_special(std::string_view text) const;
  // The id whose piece is exactly `piece` among the special (CONTROL, USER_DEFINED, UNKNOWN)
  // tokens, e.g. "<|eot_id|>"; -1 when there is none.
  int32_t special_token_id(std::string_view piece) const;
  // Ids -> text, as the reference implementation decodes a whole sequence (for sentencepiece
  // kinds the leading space of the dummy prefix is removed). The result is valid UTF-8:
  // bytes that form no character decode to U+FFFD, one per byte. Throws Error naming the id
  // and the vocabulary size on an id out of range; never throws on valid ids.
  std::string decode(const std::vector<int32_t>& ids) const;
  // The vocabulary's piece string for an id, as stored ("▁Hello", "<0x0A>", "Ġthe").
  std::string piece(int32_t id) const;
  // The bytes one token contributes to the output: byte pieces resolved, "▁" as space,
  // byte-level BPE characters mapped back; control tokens give "".
  std::string token_bytes(int32_t id) const;

  int32_t n_vocab() const;
  int32_t bos_id() const;           // -1 when none
  int32_t eos_id() const;           // -1 when none
  bool add_bos_default() const;     // whether the model expects BOS (tokenizer.ggml.add_bos_token)
  TokenType token_type(int32_t id) const;
  const std::string& kind() const;  // "sentencepiece", "llama" or "gpt2"
  const std::string& source() const;  // the path it was loaded from
  // Byte-level BPE: the tokenizer.ggml.pre name in use ("" for other kinds), and whether the
  // file had none so llama.cpp's "default" is used (worth a warning: splits may be wrong).
  const std::string& pre_tokenizer() const;
  bool pre_tokenizer_defaulted() const;

 private:
  friend class StreamDecoder;  // applies decode()'s leading-space rule token by token
  explicit Tokenizer(std::unique_ptr<TokenizerImpl> impl);
  std::unique_ptr<TokenizerImpl> impl_;
};

// Streams decoded text token by token without ever emitting half a UTF-8 character:
// incomplete trailing bytes are held back until the next token completes them.
// The concatenation of every push() and a final flush() equals decode() of the same ids.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer);
  std::string push(int32_t id);  // returns the text that became complete
  std::string flush();           // whatever is held back (invalid bytes as U+FFFD)

 private:
  const Tokenizer& tok_;
  std::string pending_;
  bool first_ = true;
};

}  // namespace llmctl
