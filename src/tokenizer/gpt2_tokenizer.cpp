// tokenizer.ggml.model = gpt2: byte-level BPE with merges and a pre-tokenizer, as llama.cpp
// loads it from GGUF metadata:
//   tokenizer.ggml.tokens      byte-level strings ("Ġthe")
//   tokenizer.ggml.token_type  optional; absent means every token is Normal
//   tokenizer.ggml.merges      "left right", in rank order
//   tokenizer.ggml.pre         pre-tokenizer name (pre_tokenizer_table.h); absent means
//                              "default" (flagged, the caller warns); an override wins
//   tokenizer.ggml.bos_token_id / eos_token_id   absent: llama.cpp's gpt2 default, id 11
//   tokenizer.ggml.add_bos_token                 absent: the pre-tokenizer row's default
//                                                (true for Llama 3, Tekken, Chameleon)
// Special/control token text in the input is plain text: it is never matched as a token.

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/gguf.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/spm_pieces.h"
#include "tokenizer/text_normalizer.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"
#include "tokenizer/utf8.h"

namespace llmctl {

namespace {

constexpr int32_t kLlamaCppDefaultSpecialId = 11;  // llama.cpp's bos/eos for gpt2 vocabularies

// What a Normal token contributes to the output: its characters mapped back to bytes. A
// character outside the byte map (hand-added tokens) is kept as its own UTF-8.
std::string byte_level_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Unit u = decode_utf8(text, pos);
    const int b = u.valid ? unicode_to_byte(u.cp) : -1;
    if (b >= 0) {
      out.push_back(static_cast<char>(static_cast<uint8_t>(b)));
    } else {
      out.append(text.substr(pos, u.size));
    }
    pos += u.size;
  }
  return out;
}

// Everything a BpeTokenizer holds besides its model.
struct BpeTokenizerParts {
  std::vector<std::string> pieces;  // as stored ("Ġthe", "▁the", "<0x0A>")
  std::vector<TokenType> types;
  std::vector<std::string> bytes;   // what each id adds to decoded text
  const RegexSplitter* splitter;    // owned by the process-wide cache (pretokenizer.h)
  TextNormalizer normalizer;        // applied before splitting; empty for GGUF vocabularies
  int32_t bos;
  int32_t eos;
  bool add_bos;
  bool strips_leading_space;  // decode drops one leading space (the Prepend("▁") normalizer)
};

// Byte-level BPE (GGUF gpt2, tokenizer.json ByteLevel) and BPE over characters
// (SentencePiece-style tokenizer.json) share this: normalize, pre-tokenize, merge, and decode
// through a table of each token's bytes.
class BpeTokenizer final : public TokenizerImpl {
 public:
  BpeTokenizer(BpeTokenizerParts parts, BpeModel bpe)
      : pieces_(std::move(parts.pieces)),
        types_(std::move(parts.types)),
        bytes_(std::move(parts.bytes)),
        bpe_(std::move(bpe)),
        splitter_(*parts.splitter),
        normalizer_(std::move(parts.normalizer)),
        bos_(parts.bos),
        eos_(parts.eos),
        add_bos_(parts.add_bos),
        strips_leading_space_(parts.strips_leading_space) {
    LLMCTL_ASSERT(types_.size() == pieces_.size() && bytes_.size() == pieces_.size());
  }

  std::vector<int32_t> encode(std::string_view text, bool add_bos) const override {
    std::vector<int32_t> ids;
    ids.reserve(text.size() / 3 + 2);
    if (add_bos && bos_ >= 0) ids.push_back(bos_);
    BpeModel::Scratch scratch;
    if (normalizer_.empty()) {
      for (std::string_view piece : splitter_.split(text)) bpe_.encode(piece, ids, scratch);
    } else {
      const std::string normalized = normalizer_.apply(text);
      for (std::string_view piece : splitter_.split(normalized)) bpe_.encode(piece, ids, scratch);
    }
    return ids;
  }

  std::string decode(const std::vector<int32_t>& ids) const override {
    std::string out;
    for (int32_t id : ids) out += bytes_.at(index(id));
    // tokenizers' Strip decoder: the space the Prepend("▁") normalizer added goes again.
    if (strips_leading_space_ && !out.empty() && out.front() == ' ') out.erase(0, 1);
    return utf8_sanitize(out);  // the Tokenizer::decode contract: valid UTF-8
  }

  std::string piece(int32_t id) const override { return pieces_.at(index(id)); }
  std::string token_bytes(int32_t id) const override { return bytes_.at(index(id)); }
  int32_t n_vocab() const override { return static_cast<int32_t>(pieces_.size()); }
  int32_t bos_id() const override { return bos_; }
  int32_t eos_id() const override { return eos_; }
  bool add_bos_default() const override { return add_bos_; }
  TokenType token_type(int32_t id) const override { return types_.at(index(id)); }
  bool strips_leading_space() const override { return strips_leading_space_; }

 private:
  size_t index(int32_t id) const {
    if (id < 0 || static_cast<size_t>(id) >= pieces_.size())
      throw Error(
          fmt::format("token id {} is out of range (vocabulary of {} tokens)", id, pieces_.size()));
    return static_cast<size_t>(id);
  }

  std::vector<std::string> pieces_;
  std::vector<TokenType> types_;
  std::vector<std::string> bytes_;
  BpeModel bpe_;
  const RegexSplitter& splitter_;  // owned by the process-wide cache (pretokenizer.h)
  TextNormalizer normalizer_;
  int32_t bos_;
  int32_t eos_;
  bool add_bos_;
  bool strips_leading_space_;
};

// An optional special-token id: the key's value when present (it must be in range), else
// the fallback when that is in range, else -1.
int32_t special_id(const GgufFile& file, const char* key, int32_t fallback, size_t n_vocab) {
  const std::optional<int64_t> v = file.get_int(key);
  if (!v) return static_cast<size_t>(fallback) < n_vocab ? fallback : -1;
  if (*v < 0 || static_cast<uint64_t>(*v) >= n_vocab)
    throw FileError(file.path(), fmt::format("metadata key '{}' = {} is not a token id (vocabulary "
                                             "of {} tokens)",
                                             key, *v, n_vocab));
  return static_cast<int32_t>(*v);
}

// Merges "left right" in rank order. The separator is the first space after the first byte,
// as llama.cpp splits it. A merge that does not split, or whose sides are not byte-level
// text, can never apply; it keeps its rank slot so the other ranks stay as in the file.
// Byte-level sides are converted to raw bytes in one arena (never longer than the text, so
// reserving that much keeps the views valid); text sides are views of the input.
struct MergeList {
  std::string arena;
  std::vector<BpeModel::Merge> merges;
};

MergeList parse_merges(const std::vector<std::string_view>& merge_text, bool byte_level) {
  MergeList out;
  size_t total = 0;
  for (const std::string_view m : merge_text) total += m.size();
  // At least 32 bytes, so the arena is never the short-string buffer, which a move would copy
  // (a heap buffer moves with the string, and the views with it).
  if (byte_level) out.arena.reserve(std::max<size_t>(total, 32));
  out.merges.reserve(merge_text.size());
  for (const std::string_view m : merge_text) {
    const size_t sep = m.find(' ', 1);
    if (sep == std::string::npos) {
      out.merges.emplace_back();
      continue;
    }
    const std::string_view left = m.substr(0, sep), right = m.substr(sep + 1);
    if (!byte_level) {
      out.merges.push_back({left, right});
      continue;
    }
    const size_t a = out.arena.size();
    if (!append_byte_level_bytes(left, out.arena)) {
      out.merges.emplace_back();
      continue;
    }
    const size_t b = out.arena.size();
    if (!append_byte_level_bytes(right, out.arena)) {
      out.arena.resize(a);
      out.merges.emplace_back();
      continue;
    }
    const std::string_view arena(out.arena.data(), out.arena.size());
    out.merges.push_back({arena.substr(a, b - a), arena.substr(b)});
  }
  return out;
}

}  // namespace

std::unique_ptr<TokenizerImpl> make_byte_level_bpe_tokenizer(std::vector<std::string> pieces,
                                                             std::vector<TokenType> types,
                                                             const std::vector<std::string_view>& merge_text,
                                                             const RegexSplitter& splitter,
                                                             bool ignore_merges, int32_t bos,
                                                             int32_t eos, bool add_bos,
                                                             TextNormalizer normalizer) {
  const size_t n = pieces.size();
  LLMCTL_ASSERT(types.size() == n);
  const MergeList merges = parse_merges(merge_text, /*byte_level=*/true);

  std::vector<std::optional<std::string>> token_bytes(n);
  for (size_t id = 0; id < n; ++id) {
    // Control tokens stay out of BPE, so their text in the input is always plain text.
    if (types[id] != TokenType::Control) token_bytes[id] = byte_level_to_bytes(pieces[id]);
  }
  BpeModel bpe(token_bytes, merges.merges, ignore_merges);

  // As llama.cpp renders tokens without special handling: Normal tokens map back to bytes
  // (reusing what loading computed), UserDefined ones are literal text, all other kinds
  // (control...) print nothing.
  std::vector<std::string> bytes(n);
  for (size_t id = 0; id < n; ++id) {
    if (types[id] == TokenType::Normal)
      bytes[id] = token_bytes[id] ? std::move(*token_bytes[id]) : byte_level_decode(pieces[id]);
    else if (types[id] == TokenType::UserDefined)
      bytes[id] = pieces[id];
  }
  BpeTokenizerParts parts{std::move(pieces), std::move(types), std::move(bytes), &splitter,
                          std::move(normalizer), bos, eos, add_bos, /*strips_leading_space=*/false};
  return std::make_unique<BpeTokenizer>(std::move(parts), std::move(bpe));
}

std::unique_ptr<TokenizerImpl> make_char_bpe_tokenizer(std::vector<std::string> pieces,
                                                       std::vector<TokenType> types,
                                                       const std::vector<std::string_view>& merge_text,
                                                       TextNormalizer normalizer, int32_t bos,
                                                       int32_t eos, bool add_bos,
                                                       bool strips_leading_space) {
  const size_t n = pieces.size();
  LLMCTL_ASSERT(types.size() == n);
  // Merge sides are text; they never hold a space (the normalizer made spaces "▁").
  const MergeList merges = parse_merges(merge_text, /*byte_level=*/false);
  std::vector<std::optional<std::string>> token_bytes(n);
  std::vector<std::string> bytes(n);
  for (size_t id = 0; id < n; ++id) {
    const std::string& p = pieces[id];
    switch (types[id]) {
      case TokenType::Byte: {  // "<0xAB>": the byte itself, for byte fallback and decoding
        const int b = byte_piece_value(p);
        if (b >= 0) token_bytes[id] = bytes[id] = std::string(1, static_cast<char>(b));
        break;
      }
      case TokenType::Normal:
        token_bytes[id] = p;
        bytes[id] = replace_space_symbol(p);
        break;
      case TokenType::UserDefined:
        bytes[id] = p;
        break;
      default:
        break;
    }
  }
  BpeModel bpe(token_bytes, merges.merges, /*ignore_merges=*/false, BpeModel::StartSymbols::Utf8Chars);
  BpeTokenizerParts parts{std::move(pieces), std::move(types), std::move(bytes),
                          &regex_splitter_for({}), std::move(normalizer), bos, eos, add_bos,
                          strips_leading_space};
  auto impl = std::make_unique<BpeTokenizer>(std::move(parts), std::move(bpe));
  impl->kind = "llama";  // what a GGUF of the same vocabulary says (tokenizer.ggml.model)
  return impl;
}

std::unique_ptr<TokenizerImpl> make_gpt2_gguf_tokenizer(const GgufFile& file,
                                                        std::string_view pre_tokenizer) {
  const std::string& path = file.path();
  std::vector<std::string> pieces = file.get_string_array("tokenizer.ggml.tokens");
  if (pieces.empty())
    throw FileError(path, "metadata key 'tokenizer.ggml.tokens' is missing or empty");
  if (pieces.size() >= static_cast<size_t>(INT32_MAX / 2))
    throw FileError(path, fmt::format("vocabulary of {} tokens is too large", pieces.size()));
  const size_t n = pieces.size();

  std::vector<TokenType> types(n, TokenType::Normal);
  if (file.find("tokenizer.ggml.token_type") != nullptr) {
    const std::vector<int32_t> raw = file.get_i32_array("tokenizer.ggml.token_type");
    if (raw.size() != n)
      throw FileError(path, fmt::format("tokenizer.ggml.token_type has {} entries, expected {} "
                                        "(one per token)",
                                        raw.size(), n));
    for (size_t id = 0; id < n; ++id) {
      if (raw[id] < 0 || raw[id] > static_cast<int32_t>(TokenType::Byte))
        throw FileError(path, fmt::format("tokenizer.ggml.token_type[{}] = {} is not a token type "
                                          "(0..6)",
                                          id, raw[id]));
      types[id] = static_cast<TokenType>(raw[id]);
    }
  }

  if (file.find("tokenizer.ggml.merges") == nullptr)
    throw FileError(path,
                    "metadata key 'tokenizer.ggml.merges' is missing (a gpt2 vocabulary "
                    "needs its BPE merges)");
  const std::vector<std::string_view> merges = file.get_string_array_views("tokenizer.ggml.merges");

  PreTokenizerChoice choice;
  {
    const GgufValue* key = file.find("tokenizer.ggml.pre");
    const std::string value = key != nullptr ? file.get_string("tokenizer.ggml.pre") : "";
    try {
      choice = choose_pre_tokenizer(key != nullptr ? &value : nullptr, pre_tokenizer);
    } catch (const Error& e) {
      // A name the user typed is their error, not the file's.
      if (!pre_tokenizer.empty())
        throw Error(fmt::format("--pre-tokenizer: {}", e.what()));
      throw FileError(path, fmt::format("tokenizer.ggml.pre: {}", e.what()), FileError::kNoOffset,
                      "pass --pre-tokenizer NAME with one of the known names (a newer "
                      "llama.cpp may know this one)");
    }
  }
  const PreTokenizerSpec& pre = *choice.spec;
  if (!pre.byte_encode)
    throw FileError(path, fmt::format("pre-tokenizer '{}' is for BPE on raw UTF-8 "
                                      "(SentencePiece-style), not for a byte-level gpt2 "
                                      "vocabulary; llmctl does not support it",
                                      pre.name));

  const int32_t bos = special_id(file, "tokenizer.ggml.bos_token_id",
                                 pre.no_bos ? -1 : kLlamaCppDefaultSpecialId, n);
  const int32_t eos = special_id(file, "tokenizer.ggml.eos_token_id", kLlamaCppDefaultSpecialId, n);
  const bool add_bos =
      file.get_bool_or("tokenizer.ggml.add_bos_token", pre.add_bos);

  auto impl = make_byte_level_bpe_tokenizer(std::move(pieces), std::move(types), merges,
                                            pre_tokenizer_splitter(pre), pre.ignore_merges, bos,
                                            eos, add_bos);
  impl->kind = "gpt2";
  impl->source = path;
  impl->pre_tokenizer = pre.name;
  impl->pre_tokenizer_defaulted = choice.defaulted;
  return impl;
}

}  // namespace llmctl
