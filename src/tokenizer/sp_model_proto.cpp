#include "tokenizer/sp_model_proto.h"

#include <cstring>

#include "core/error.h"

namespace llmctl {

// ---------------------------------------------------------------------------
// Wire format: a field is a varint key (number << 3 | wire type) then its payload.
// Wire types used here: 0 varint, 2 length-delimited, 5 fixed32 (little-endian float).
// ---------------------------------------------------------------------------
namespace {

constexpr uint32_t kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;

class ProtoWriter {
 public:
  void varint(uint64_t v) {
    while (v >= 0x80U) {
      out_.push_back(static_cast<char>((v & 0x7FU) | 0x80U));
      v >>= 7;
    }
    out_.push_back(static_cast<char>(v));
  }
  void key(uint32_t field, uint32_t wire_type) { varint((uint64_t{field} << 3) | wire_type); }
  // proto int32: negative values are sign-extended to 64 bits (10 bytes on the wire).
  void int32_field(uint32_t field, int32_t v) {
    key(field, kVarint);
    varint(static_cast<uint64_t>(static_cast<int64_t>(v)));
  }
  void bool_field(uint32_t field, bool v) {
    key(field, kVarint);
    varint(v ? 1 : 0);
  }
  void bytes_field(uint32_t field, std::string_view s) {
    key(field, kLengthDelimited);
    varint(s.size());
    out_.append(s);
  }
  void float_field(uint32_t field, float f) {
    key(field, kFixed32);
    uint32_t bits = 0;
    std::memcpy(&bits, &f, sizeof bits);
    for (int i = 0; i < 4; ++i) out_.push_back(static_cast<char>((bits >> (8 * i)) & 0xFFU));
  }
  const std::string& bytes() const { return out_; }

 private:
  std::string out_;
};

int32_t proto_piece_type(TokenType t) {
  // sentencepiece has no "undefined" piece type; ggml's 0 means a normal piece there.
  return t == TokenType::Undefined ? static_cast<int32_t>(TokenType::Normal) : static_cast<int32_t>(t);
}

class ProtoReader {
 public:
  explicit ProtoReader(std::string_view s) : s_(s) {}
  bool done() const { return pos_ >= s_.size(); }

  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= s_.size()) fail("truncated varint");
      const auto b = static_cast<uint8_t>(s_[pos_++]);
      v |= uint64_t{b & 0x7FU} << shift;
      if ((b & 0x80U) == 0) return v;
    }
    fail("varint longer than 10 bytes");
  }
  std::string_view length_delimited() {
    const uint64_t n = varint();
    if (n > s_.size() - pos_) fail("length-delimited field runs past the end");
    const std::string_view v = s_.substr(pos_, static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return v;
  }
  float fixed32_float() {
    if (s_.size() - pos_ < 4) fail("truncated fixed32");
    uint32_t bits = 0;
    for (size_t i = 0; i < 4; ++i) bits |= uint32_t{static_cast<uint8_t>(s_[pos_ + i])} << (8 * i);
    pos_ += 4;
    float f = 0.0f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }
  void skip(uint32_t wire_type) {
    switch (wire_type) {
      case kVarint: varint(); return;
      case kFixed64: advance(8); return;
      case kLengthDelimited: length_delimited(); return;
      case kFixed32: advance(4); return;
      default: fail("unsupported wire type " + std::to_string(wire_type));
    }
  }
  // Reads a key; returns false at the end of the message.
  bool next(uint32_t& field, uint32_t& wire_type) {
    if (done()) return false;
    const uint64_t k = varint();
    field = static_cast<uint32_t>(k >> 3);
    wire_type = static_cast<uint32_t>(k & 7U);
    if (field == 0) fail("field number 0");
    return true;
  }

 private:
  void advance(size_t n) {
    if (s_.size() - pos_ < n) fail("truncated field");
    pos_ += n;
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw Error("malformed sentencepiece model: " + what + " at byte " + std::to_string(pos_));
  }
  std::string_view s_;
  size_t pos_ = 0;
};

SpPiece parse_piece(std::string_view msg) {
  SpPiece p;
  ProtoReader r(msg);
  uint32_t field = 0, wt = 0;
  while (r.next(field, wt)) {
    if (field == 1 && wt == kLengthDelimited) {
      p.piece = std::string(r.length_delimited());
    } else if (field == 2 && wt == kFixed32) {
      p.score = r.fixed32_float();
    } else if (field == 3 && wt == kVarint) {
      const uint64_t t = r.varint();
      // proto2 keeps an unknown enum value out of the field, leaving the default (NORMAL).
      if (t >= 1 && t <= 6) p.type = static_cast<TokenType>(t);
    } else {
      r.skip(wt);
    }
  }
  return p;
}

}  // namespace

std::string serialize_sp_model(const SpModelSpec& spec) {
  ProtoWriter w;
  for (const SpPiece& p : spec.pieces) {
    ProtoWriter pw;
    pw.bytes_field(1, p.piece);
    pw.float_field(2, p.score);
    pw.int32_field(3, proto_piece_type(p.type));
    w.bytes_field(1, pw.bytes());
  }

  ProtoWriter tw;
  tw.int32_field(3, static_cast<int32_t>(spec.model_type));
  tw.int32_field(4, static_cast<int32_t>(spec.pieces.size()));
  tw.bool_field(24, spec.treat_whitespace_as_suffix);
  tw.bool_field(26, spec.allow_whitespace_only_pieces);
  tw.bool_field(35, spec.byte_fallback);
  tw.int32_field(40, spec.unk_id);
  tw.int32_field(41, spec.bos_id);
  tw.int32_field(42, spec.eos_id);
  tw.int32_field(43, spec.pad_id);
  if (!spec.unk_piece.empty()) tw.bytes_field(45, spec.unk_piece);
  if (!spec.bos_piece.empty()) tw.bytes_field(46, spec.bos_piece);
  if (!spec.eos_piece.empty()) tw.bytes_field(47, spec.eos_piece);
  if (!spec.pad_piece.empty()) tw.bytes_field(48, spec.pad_piece);
  w.bytes_field(2, tw.bytes());

  ProtoWriter nw;
  nw.bytes_field(1, spec.normalizer_name);
  nw.bool_field(3, spec.add_dummy_prefix);
  nw.bool_field(4, spec.remove_extra_whitespaces);
  nw.bool_field(5, spec.escape_whitespaces);
  w.bytes_field(3, nw.bytes());
  return w.bytes();
}

SpModelInfo parse_sp_model(std::string_view bytes) {
  SpModelInfo info;
  ProtoReader r(bytes);
  uint32_t field = 0, wt = 0;
  while (r.next(field, wt)) {
    if (field == 1 && wt == kLengthDelimited) {
      info.pieces.push_back(parse_piece(r.length_delimited()));
    } else if (field == 2 && wt == kLengthDelimited) {
      ProtoReader tr(r.length_delimited());
      while (tr.next(field, wt)) {
        if (field == 44 && wt == kLengthDelimited)
          info.unk_surface = std::string(tr.length_delimited());
        else
          tr.skip(wt);
      }
    } else if (field == 3 && wt == kLengthDelimited) {
      ProtoReader nr(r.length_delimited());
      while (nr.next(field, wt)) {
        if (field == 2 && wt == kLengthDelimited)
          info.has_precompiled_charsmap = !nr.length_delimited().empty();
        else if (field == 3 && wt == kVarint)
          info.add_dummy_prefix = nr.varint() != 0;
        else if (field == 4 && wt == kVarint)
          info.remove_extra_whitespaces = nr.varint() != 0;
        else
          nr.skip(wt);
      }
    } else {
      r.skip(wt);
    }
  }
  return info;
}

}  // namespace llmctl
