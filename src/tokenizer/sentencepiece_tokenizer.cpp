// sentencepiece-family tokenizers: a .model file, and a GGUF vocabulary with
// tokenizer.ggml.model = llama. Both encode through libsentencepiece: the GGUF arrays are
// turned into a ModelProto in memory (sp_model_proto.h), so the ids are sentencepiece's by
// construction. Decoding is done here, from a per-id byte table, with sentencepiece's rules,
// so that decode() and StreamDecoder (tokenizer.cpp) share one definition.
#include <sentencepiece_processor.h>

#include <fmt/format.h>

#include <fstream>
#include <iterator>
#include <string_view>
#include <unordered_set>
#include <sstream>

#include "core/error.h"
#include "io/gguf.h"
#include "tokenizer/bpe_tables.h"
#include "tokenizer/sp_model_proto.h"
#include "tokenizer/spm_pieces.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"

namespace llmctl {

int byte_piece_value(std::string_view piece) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return -1;
  int v = 0;
  for (size_t i = 3; i < 5; ++i) {
    const char c = piece[i];
    int d = -1;
    if (c >= '0' && c <= '9') d = c - '0';
    if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

std::string replace_space_symbol(std::string_view piece) {
  std::string out;
  out.reserve(piece.size());
  for (size_t pos = 0; pos < piece.size();) {
    if (piece.substr(pos, kSpaceSymbol.size()) == kSpaceSymbol) {
      out.push_back(' ');
      pos += kSpaceSymbol.size();
    } else {
      out.push_back(piece[pos++]);
    }
  }
  return out;
}

namespace {

// Pieces that sentencepiece decodes as text (and whose leading "▁" the dummy prefix strips).
bool is_text_type(TokenType t) {
  return t == TokenType::Normal || t == TokenType::UserDefined || t == TokenType::Unused ||
         t == TokenType::Undefined;
}

// What a token contributes to the decoded bytes, before UTF-8 repair and prefix stripping.
std::string token_surface(const SpPiece& p, std::string_view unk_surface) {
  switch (p.type) {
    case TokenType::Control: return {};
    case TokenType::Unknown: return std::string(unk_surface);
    case TokenType::Byte: {
      const int b = byte_piece_value(p.piece);
      // A byte-typed piece sentencepiece could not parse decodes as its text.
      return b < 0 ? p.piece : std::string(1, static_cast<char>(b));
    }
    default: return replace_space_symbol(p.piece);
  }
}

std::string read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FileError(path, "cannot open file");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw FileError(path, "read error");
  return ss.str();
}

// ---------------------------------------------------------------------------
// The tokenizer
// ---------------------------------------------------------------------------

class SentencePieceTokenizer final : public TokenizerImpl {
 public:
  // `serialized` is a ModelProto; `pieces` is the vocabulary as the user's file states it
  // (original strings and types), which may differ from what sentencepiece was given
  // (placeholders for empty or duplicate pieces).
  SentencePieceTokenizer(const std::string& path, const std::string& serialized,
                         std::vector<SpPiece> pieces, std::string unk_surface, bool strip_space)
      : pieces_(std::move(pieces)), strip_space_(strip_space) {
    const auto status = sp_.LoadFromSerializedProto(serialized);
    if (!status.ok())
      throw FileError(path, fmt::format("sentencepiece cannot load the vocabulary: {}", status.ToString()));
    if (sp_.GetPieceSize() != static_cast<int>(pieces_.size()))
      throw FileError(path, fmt::format("sentencepiece loaded {} pieces, expected {}", sp_.GetPieceSize(),
                                        pieces_.size()));
    surface_.reserve(pieces_.size());
    for (const SpPiece& p : pieces_) surface_.push_back(token_surface(p, unk_surface));
  }

  std::vector<int32_t> encode(std::string_view text, bool add_bos) const override {
    std::vector<int> ids;
    const auto status = sp_.Encode(text, &ids);
    if (!status.ok()) throw Error(fmt::format("sentencepiece encode failed: {}", status.ToString()));
    std::vector<int32_t> out;
    out.reserve(ids.size() + 1);
    if (add_bos && bos_id_ >= 0) out.push_back(bos_id_);
    out.insert(out.end(), ids.begin(), ids.end());
    return out;
  }

  // sentencepiece's rules: control pieces vanish, <unk> shows as " ⁇ ", "▁" becomes a space,
  // and the one leading "▁" of the first text piece (the dummy prefix) is dropped when no
  // output came before it ([▁, ▁Hello] -> " Hello", so " Hello" round-trips). Consecutive
  // byte pieces are joined, and any other piece, a control piece included, ends the run:
  // bytes of a run that form no character become U+FFFD, one per byte.
  std::string decode(const std::vector<int32_t>& ids) const override {
    std::string out, run;
    bool at_start = strip_space_;
    for (const int32_t id : ids) {
      const auto i = static_cast<size_t>(id);
      std::string_view s = surface_[i];
      if (pieces_[i].type == TokenType::Byte) {
        run.append(s);
        at_start = false;
        continue;
      }
      out += utf8_sanitize(run);
      run.clear();
      if (at_start) {
        if (is_text_type(pieces_[i].type)) {
          if (!s.empty() && s.front() == ' ') s.remove_prefix(1);
          at_start = false;
        } else if (!s.empty()) {
          at_start = false;
        }
      }
      out += utf8_sanitize(s);
    }
    return out + utf8_sanitize(run);
  }

  std::string piece(int32_t id) const override { return pieces_[static_cast<size_t>(id)].piece; }
  std::string token_bytes(int32_t id) const override { return surface_[static_cast<size_t>(id)]; }
  int32_t n_vocab() const override { return static_cast<int32_t>(pieces_.size()); }
  int32_t bos_id() const override { return bos_id_; }
  int32_t eos_id() const override { return eos_id_; }
  bool add_bos_default() const override { return add_bos_; }
  TokenType token_type(int32_t id) const override { return pieces_[static_cast<size_t>(id)].type; }
  bool strips_leading_space() const override { return strip_space_; }

  // sentencepiece resolves BOS/EOS by piece name (<s>, </s>); -1 when the model has none.
  int32_t sp_bos_id() const { return sp_.bos_id(); }
  int32_t sp_eos_id() const { return sp_.eos_id(); }

  void set_specials(int32_t bos, int32_t eos, bool add_bos) {
    bos_id_ = bos;
    eos_id_ = eos;
    add_bos_ = add_bos;
  }

 private:
  sentencepiece::SentencePieceProcessor sp_;
  std::vector<SpPiece> pieces_;
  std::vector<std::string> surface_;
  bool strip_space_ = true;
  int32_t bos_id_ = -1;
  int32_t eos_id_ = -1;
  bool add_bos_ = true;
};

// ---------------------------------------------------------------------------
// GGUF metadata -> ModelProto
// ---------------------------------------------------------------------------

// A special-token id from metadata: absent -> fallback; 0xFFFFFFFF or negative -> none (-1);
// otherwise it must name a token.
int32_t special_id(const GgufFile& f, std::string_view key, int32_t fallback, size_t n_vocab) {
  const std::optional<int64_t> v = f.get_int(key);
  if (!v) return fallback;
  if (*v < 0 || *v == int64_t{0xFFFFFFFF}) return -1;
  if (static_cast<uint64_t>(*v) >= n_vocab)
    throw FileError(f.path(), fmt::format("{} = {} is out of range (vocabulary of {} tokens)", key, *v, n_vocab));
  return static_cast<int32_t>(*v);
}

// Gives a piece sentencepiece cannot hold (empty, or a repeat of an earlier one) a unique
// name and the CONTROL type, so it is never produced by encoding; decoding uses the
// original piece, not this stand-in.
std::string placeholder(size_t id, const std::unordered_set<std::string_view>& taken) {
  std::string name = fmt::format("<llmctl:unreachable:{}>", id);
  while (taken.count(name) != 0) name += "_";
  return name;
}

SpModelSpec spec_from_gguf(const GgufFile& f, std::vector<SpPiece>& original, bool& add_bos,
                           int32_t& bos, int32_t& eos) {
  const std::string& path = f.path();
  const std::vector<std::string> tokens = f.get_string_array("tokenizer.ggml.tokens");
  if (tokens.empty()) throw FileError(path, "tokenizer.ggml.tokens is missing or empty");
  if (tokens.size() > static_cast<size_t>(INT32_MAX))
    throw FileError(path, fmt::format("tokenizer.ggml.tokens has {} entries, too many", tokens.size()));
  const size_t n = tokens.size();
  const std::vector<float> scores = f.get_f32_array("tokenizer.ggml.scores");
  const std::vector<int32_t> types = f.get_i32_array("tokenizer.ggml.token_type");
  if (!scores.empty() && scores.size() != n)
    throw FileError(path, fmt::format("tokenizer.ggml.scores has {} entries, tokenizer.ggml.tokens {}",
                                      scores.size(), n));
  if (!types.empty() && types.size() != n)
    throw FileError(path, fmt::format("tokenizer.ggml.token_type has {} entries, tokenizer.ggml.tokens {}",
                                      types.size(), n));

  original.resize(n);
  for (size_t i = 0; i < n; ++i) {
    original[i].piece = tokens[i];
    original[i].score = scores.empty() ? 0.0f : scores[i];
    const int32_t t = types.empty() ? 1 : types[i];
    if (t < 0 || t > 6)
      throw FileError(path, fmt::format("tokenizer.ggml.token_type[{}] = {} is not a token type (0..6)", i, t));
    original[i].type = static_cast<TokenType>(t);
  }

  // llama.cpp's defaults for sentencepiece vocabularies when a key is absent.
  bos = special_id(f, "tokenizer.ggml.bos_token_id", 1 < n ? 1 : -1, n);
  eos = special_id(f, "tokenizer.ggml.eos_token_id", 2 < n ? 2 : -1, n);
  int32_t unk = special_id(f, "tokenizer.ggml.unknown_token_id", -1, n);
  const int32_t pad = special_id(f, "tokenizer.ggml.padding_token_id", -1, n);
  add_bos = f.get_bool_or("tokenizer.ggml.add_bos_token", true);

  SpModelSpec spec;
  spec.pieces = original;
  for (SpPiece& p : spec.pieces)
    if (p.type == TokenType::Undefined) p.type = TokenType::Normal;
  if (unk < 0) {
    for (size_t i = 0; i < n && unk < 0; ++i)
      if (original[i].type == TokenType::Unknown) unk = static_cast<int32_t>(i);
  }
  if (unk < 0)
    throw FileError(path, "the vocabulary has no unknown token (no tokenizer.ggml.unknown_token_id and no "
                          "token of type UNKNOWN); sentencepiece needs one");
  // sentencepiece allows exactly one UNKNOWN piece: the one metadata names.
  for (size_t i = 0; i < n; ++i)
    if (spec.pieces[i].type == TokenType::Unknown && static_cast<int32_t>(i) != unk)
      spec.pieces[i].type = TokenType::Control;
  spec.pieces[static_cast<size_t>(unk)].type = TokenType::Unknown;

  // Byte fallback needs all 256 byte pieces; with only some, they are kept out of encoding.
  std::vector<bool> have_byte(256, false);
  size_t n_bytes = 0;
  for (size_t i = 0; i < n; ++i) {
    if (spec.pieces[i].type != TokenType::Byte) continue;
    const int b = byte_piece_value(spec.pieces[i].piece);
    if (b < 0)
      throw FileError(path, fmt::format("token {} has type BYTE but its text '{}' is not of the form <0xNN>", i,
                                        spec.pieces[i].piece));
    if (!have_byte[static_cast<size_t>(b)]) ++n_bytes;
    have_byte[static_cast<size_t>(b)] = true;
  }
  spec.byte_fallback = n_bytes == 256;
  if (!spec.byte_fallback)
    for (SpPiece& p : spec.pieces)
      if (p.type == TokenType::Byte) p.type = TokenType::Control;

  // Pieces must be non-empty and unique within sentencepiece's two name spaces (text pieces,
  // and unknown/control/byte pieces); llama.cpp tolerates both, so stand-ins keep ids aligned.
  // Flat hash tables (bpe_tables.h): a 262k-piece Gemma vocabulary spent half a second in
  // std::set<std::string> nodes. The set of every name is only built when a stand-in is needed.
  ByteStringIds text_names, reserved_names;
  text_names.reserve(n);
  std::unordered_set<std::string_view> taken;  // views into `tokens` and spec.pieces
  for (size_t i = 0; i < n; ++i) {
    SpPiece& p = spec.pieces[i];
    ByteStringIds& space = is_text_type(p.type) ? text_names : reserved_names;
    const auto id = static_cast<int32_t>(i);
    if (p.piece.empty() || space.insert(p.piece, id, /*overwrite=*/false) != id) {
      if (id == unk)
        throw FileError(path, fmt::format("the unknown token {} is empty or repeats an earlier token", i));
      if (taken.empty()) taken.insert(tokens.begin(), tokens.end());
      p.piece = placeholder(i, taken);
      p.type = TokenType::Control;
      taken.insert(p.piece);
      reserved_names.insert(p.piece, id, /*overwrite=*/false);
    }
  }

  spec.model_type = SpModelType::Bpe;
  spec.unk_id = unk;
  spec.bos_id = bos;
  spec.eos_id = eos;
  spec.pad_id = pad;
  spec.unk_piece = spec.pieces[static_cast<size_t>(unk)].piece;
  if (bos >= 0) spec.bos_piece = spec.pieces[static_cast<size_t>(bos)].piece;
  if (eos >= 0) spec.eos_piece = spec.pieces[static_cast<size_t>(eos)].piece;
  if (pad >= 0) spec.pad_piece = spec.pieces[static_cast<size_t>(pad)].piece;
  spec.add_dummy_prefix = f.get_bool_or("tokenizer.ggml.add_space_prefix", true);
  spec.remove_extra_whitespaces = f.get_bool_or("tokenizer.ggml.remove_extra_whitespaces", false);
  return spec;
}

}  // namespace

// ---------------------------------------------------------------------------
// Factories
// ---------------------------------------------------------------------------

std::unique_ptr<TokenizerImpl> make_sentencepiece_tokenizer(const std::string& path) {
  const std::string bytes = read_whole_file(path);
  SpModelInfo info;
  try {
    info = parse_sp_model(bytes);
  } catch (const Error& e) {
    throw FileError(path, e.what());
  }
  if (info.pieces.empty()) throw FileError(path, "not a sentencepiece model: it holds no pieces");
  auto impl = std::make_unique<SentencePieceTokenizer>(path, bytes, info.pieces, info.unk_surface,
                                                       info.add_dummy_prefix || info.remove_extra_whitespaces);
  // A .model has no add_bos setting; Llama-family models expect BOS whenever there is one.
  impl->set_specials(impl->sp_bos_id(), impl->sp_eos_id(), impl->sp_bos_id() >= 0);
  return impl;
}

std::unique_ptr<TokenizerImpl> make_llama_gguf_tokenizer(const GgufFile& file) {
  std::vector<SpPiece> original;
  bool add_bos = true;
  int32_t bos = -1, eos = -1;
  const SpModelSpec spec = spec_from_gguf(file, original, add_bos, bos, eos);
  auto impl = std::make_unique<SentencePieceTokenizer>(file.path(), serialize_sp_model(spec), std::move(original),
                                                       " \xE2\x81\x87 ",
                                                       spec.add_dummy_prefix || spec.remove_extra_whitespaces);
  impl->set_specials(bos, eos, add_bos);
  return impl;
}

}  // namespace llmctl
