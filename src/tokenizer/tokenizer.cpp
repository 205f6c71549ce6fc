// The Tokenizer facade: file-kind detection, dispatch to an implementation, id range checks
// (implementations may assume valid ids), and the streaming decoder.
#include "tokenizer/tokenizer.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "io/gguf.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"

namespace llmctl {

namespace {

// The first bytes of a file, up to n; throws FileError when it cannot be opened.
std::string read_head(const std::string& path, size_t n) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw FileError(path, "is a directory, not a tokenizer file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FileError(path, fmt::format("cannot open: {}", std::strerror(errno)));
  std::string head(n, '\0');
  in.read(head.data(), static_cast<std::streamsize>(n));
  head.resize(static_cast<size_t>(in.gcount()));
  return head;
}

// A serialized ModelProto starts with a length-delimited field among 1..5 (pieces first,
// as every serializer writes fields in number order).
bool looks_like_sentencepiece(std::string_view head) {
  if (head.empty()) return false;
  const auto b = static_cast<uint8_t>(head[0]);
  return b == 0x0A || b == 0x12 || b == 0x1A || b == 0x22 || b == 0x2A;
}

std::string hex_bytes(std::string_view s) {
  std::string out;
  for (const char c : s) out += fmt::format("{}{:02x}", out.empty() ? "" : " ", static_cast<uint8_t>(c));
  return out;
}

bool is_special_type(TokenType t) {
  return t == TokenType::Control || t == TokenType::UserDefined || t == TokenType::Unknown;
}

}  // namespace

// ---------------------------------------------------------------------------
// Construction
// ---------------------------------------------------------------------------

Tokenizer::Tokenizer(std::unique_ptr<TokenizerImpl> impl) : impl_(std::move(impl)) {
  LLMCTL_ASSERT(impl_ != nullptr);
  // The tokens llama.cpp's cache_special_tokens holds: CONTROL, USER_DEFINED and UNKNOWN.
  std::vector<std::pair<int32_t, std::string>> specials;
  const int32_t n = impl_->n_vocab();
  for (int32_t id = 0; id < n; ++id)
    if (is_special_type(impl_->token_type(id))) specials.emplace_back(id, impl_->piece(id));
  impl_->specials = SpecialTokenSplitter(std::move(specials));
}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::from_file(const std::string& path) { return from_file(path, {}); }

Tokenizer Tokenizer::from_file(const std::string& path, const TokenizerOptions& options) {
  const std::string head = read_head(path, 4);
  if (head.empty())
    throw FileError(path, "empty file; expected a GGUF file or a sentencepiece .model");
  if (head == "GGUF") return from_gguf(GgufFile::open(path), options);
  if (head[0] == '{') {
    if (!options.pre_tokenizer.empty())
      throw FileError(path, fmt::format("a pre-tokenizer ('{}') was asked for, but a "
                                        "tokenizer.json brings its own",
                                        options.pre_tokenizer));
    return from_hf_tokenizer_json(path);
  }
  if (looks_like_sentencepiece(head)) {
    if (!options.pre_tokenizer.empty())
      throw FileError(path, fmt::format("a pre-tokenizer ('{}') was asked for, but a "
                                        "sentencepiece model has none",
                                        options.pre_tokenizer));
    return from_sentencepiece(path);
  }
  throw FileError(path, fmt::format("not a GGUF file or a sentencepiece .model (starts with bytes {})",
                                    hex_bytes(head)),
                  FileError::kNoOffset, "a tokenizer is a GGUF model/vocabulary or a sentencepiece tokenizer.model");
}

Tokenizer Tokenizer::from_gguf(const GgufFile& file) { return from_gguf(file, {}); }

Tokenizer Tokenizer::from_gguf(const GgufFile& file, const TokenizerOptions& options) {
  const GgufValue* model = file.find("tokenizer.ggml.model");
  if (model == nullptr)
    throw FileError(file.path(), "no tokenizer: metadata key 'tokenizer.ggml.model' is missing (supported: llama, gpt2)");
  const std::string name = file.get_string("tokenizer.ggml.model");
  std::unique_ptr<TokenizerImpl> impl;
  if (name != "gpt2" && !options.pre_tokenizer.empty())
    throw FileError(file.path(), fmt::format("a pre-tokenizer ('{}') was asked for, but "
                                             "tokenizer.ggml.model = '{}' has none (only gpt2 "
                                             "vocabularies do)",
                                             options.pre_tokenizer, name));
  if (name == "llama") {
    impl = make_llama_gguf_tokenizer(file);
  } else if (name == "gpt2") {
    impl = make_gpt2_gguf_tokenizer(file, options.pre_tokenizer);
  } else {
    throw FileError(file.path(),
                    fmt::format("tokenizer.ggml.model = '{}' is not supported (supported: llama, gpt2)", name));
  }
  impl->kind = name;
  impl->source = file.path();
  return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::from_hf_tokenizer_json(const std::string& path) {
  std::unique_ptr<TokenizerImpl> impl = make_hf_json_tokenizer(path);
  // As llama.cpp names the two kinds in GGUF: byte-level BPE "gpt2", SentencePiece-style "llama".
  if (impl->kind.empty()) impl->kind = "gpt2";
  impl->source = path;
  return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::from_sentencepiece(const std::string& path) {
  std::unique_ptr<TokenizerImpl> impl = make_sentencepiece_tokenizer(path);
  impl->kind = "sentencepiece";
  impl->source = path;
  return Tokenizer(std::move(impl));
}

// ---------------------------------------------------------------------------
// Queries: ids are checked here once
// ---------------------------------------------------------------------------

namespace {
void check_id(int32_t id, int32_t n_vocab) {
  if (id < 0 || id >= n_vocab)
    throw Error(fmt::format("token id {} is out of range (vocabulary of {} tokens)", id, n_vocab));
}
}  // namespace

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos) const {
  return impl_->encode(text, add_bos);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos,
                                       bool parse_special) const {
  if (!parse_special) return impl_->encode(text, add_bos);
  // llama_tokenize_impl: BOS, then the fragments in order; every text fragment is encoded
  // separately, so a sentencepiece vocabulary adds its dummy-prefix space to each of them
  // (llama.cpp: "prefix with space if previous is special").
  std::vector<int32_t> out;
  if (add_bos && impl_->bos_id() >= 0) out.push_back(impl_->bos_id());
  for (const TextFragment& f : impl_->specials.split(text)) {
    if (f.id >= 0) {
      out.push_back(f.id);
    } else {
      const std::vector<int32_t> ids = impl_->encode(f.text, false);
      out.insert(out.end(), ids.begin(), ids.end());
    }
  }
  return out;
}

std::vector<TextFragment> Tokenizer::split_special(std::string_view text) const {
  return impl_->specials.split(text);
}

int32_t Tokenizer::special_token_id(std::string_view piece) const {
  return impl_->specials.find(piece);
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  const int32_t n = impl_->n_vocab();
  for (const int32_t id : ids) check_id(id, n);
  return impl_->decode(ids);
}

std::string Tokenizer::piece(int32_t id) const {
  check_id(id, impl_->n_vocab());
  return impl_->piece(id);
}

std::string Tokenizer::token_bytes(int32_t id) const {
  check_id(id, impl_->n_vocab());
  return impl_->token_bytes(id);
}

TokenType Tokenizer::token_type(int32_t id) const {
  check_id(id, impl_->n_vocab());
  return impl_->token_type(id);
}

int32_t Tokenizer::n_vocab() const { return impl_->n_vocab(); }
int32_t Tokenizer::bos_id() const { return impl_->bos_id(); }
int32_t Tokenizer::eos_id() const { return impl_->eos_id(); }
bool Tokenizer::add_bos_default() const { return impl_->add_bos_default(); }
const std::string& Tokenizer::kind() const { return impl_->kind; }
const std::string& Tokenizer::source() const { return impl_->source; }
const std::string& Tokenizer::pre_tokenizer() const { return impl_->pre_tokenizer; }
bool Tokenizer::pre_tokenizer_defaulted() const { return impl_->pre_tokenizer_defaulted; }

// ---------------------------------------------------------------------------
// StreamDecoder
// ---------------------------------------------------------------------------

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer) : tok_(tokenizer) {}

std::string StreamDecoder::push(int32_t id) {
  std::string bytes = tok_.token_bytes(id);  // range-checked
  const TokenizerImpl& impl = *tok_.impl_;
  const TokenType type = impl.token_type(id);
  // The dummy-prefix rule of decode(): the first text piece loses one leading space, unless
  // some output (a byte piece, <unk>) came before it; control pieces do not count.
  if (first_) {
    if (!impl.strips_leading_space()) {
      first_ = false;
    } else if (type == TokenType::Normal || type == TokenType::UserDefined || type == TokenType::Unused ||
               type == TokenType::Undefined) {
      if (!bytes.empty() && bytes.front() == ' ') bytes.erase(0, 1);
      first_ = false;
    } else if (!bytes.empty()) {
      first_ = false;
    }
  }
  std::string out;
  // sentencepiece joins only consecutive byte pieces into characters; any other piece ends
  // the run, so what is held back is final now (invalid bytes -> U+FFFD), and the piece's own
  // text is complete. Byte-level BPE (gpt2) joins bytes across all tokens.
  if (impl.kind != "gpt2" && type != TokenType::Byte) {
    out = utf8_sanitize(pending_) + utf8_sanitize(bytes);
    pending_.clear();
    return out;
  }
  pending_ += bytes;
  // Hold back a trailing partial character; everything before it is final. The held bytes
  // start with a lead byte, so repairing the prefix now equals repairing the whole later.
  const size_t keep = utf8_incomplete_tail(pending_);
  out = utf8_sanitize(std::string_view(pending_).substr(0, pending_.size() - keep));
  pending_.erase(0, pending_.size() - keep);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out = utf8_sanitize(pending_);
  pending_.clear();
  return out;
}

}  // namespace llmctl
