#pragma once
// A tiny protobuf wire-format writer and reader for sentencepiece's ModelProto, limited to
// the fields llmctl needs. Debian ships libsentencepiece without sentencepiece_model.pb.h,
// and a protobuf dependency for a few dozen bytes of framing is not worth it.
//
// Field numbers (sentencepiece_model.proto, proto2):
//   ModelProto      1 pieces (repeated SentencePiece), 2 trainer_spec, 3 normalizer_spec
//   SentencePiece   1 piece (string), 2 score (float), 3 type (enum, default NORMAL=1)
//   TrainerSpec     3 model_type (UNIGRAM=1, BPE=2), 4 vocab_size, 24 treat_whitespace_as_suffix,
//                   26 allow_whitespace_only_pieces, 35 byte_fallback, 40 unk_id, 41 bos_id,
//                   42 eos_id, 43 pad_id, 44 unk_surface, 45 unk_piece, 46 bos_piece,
//                   47 eos_piece, 48 pad_piece
//   NormalizerSpec  1 name, 3 add_dummy_prefix (default true), 4 remove_extra_whitespaces
//                   (default true), 5 escape_whitespaces (default true)

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace llmctl {

struct SpPiece {
  std::string piece;
  float score = 0.0f;
  TokenType type = TokenType::Normal;  // written as the sentencepiece enum (same numbers)
};

enum class SpModelType : int32_t { Unigram = 1, Bpe = 2 };

// What llmctl writes. Defaults mirror the Llama 2 tokenizer.model where they affect encoding.
struct SpModelSpec {
  std::vector<SpPiece> pieces;
  SpModelType model_type = SpModelType::Bpe;
  bool byte_fallback = false;
  bool allow_whitespace_only_pieces = true;
  bool treat_whitespace_as_suffix = false;
  int32_t unk_id = 0;
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t pad_id = -1;
  // Piece strings sentencepiece uses to resolve bos_id()/eos_id()/pad_id(); empty: not written.
  std::string unk_piece, bos_piece, eos_piece, pad_piece;
  std::string normalizer_name = "identity";
  bool add_dummy_prefix = true;
  bool remove_extra_whitespaces = false;
  bool escape_whitespaces = true;
};

// Serializes a ModelProto for SentencePieceProcessor::LoadFromSerializedProto.
std::string serialize_sp_model(const SpModelSpec& spec);

// What llmctl reads back from a serialized ModelProto (a .model file), with proto2 defaults
// for absent fields.
struct SpModelInfo {
  std::vector<SpPiece> pieces;
  bool add_dummy_prefix = true;
  bool remove_extra_whitespaces = true;
  bool has_precompiled_charsmap = false;
  std::string unk_surface = " \xE2\x81\x87 ";  // " ⁇ "
};

// Parses the fields above, skipping all others. Throws Error("...") on malformed wire data
// (truncated varint or length, unsupported wire type).
SpModelInfo parse_sp_model(std::string_view bytes);

}  // namespace llmctl
