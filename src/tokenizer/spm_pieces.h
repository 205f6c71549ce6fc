#pragma once
// How SentencePiece spells pieces, shared by the sentencepiece tokenizer and the
// SentencePiece-style BPE of tokenizer.json files (Llama 2, Gemma).
#include <string>
#include <string_view>

namespace llmctl {

inline constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";  // U+2581 "▁", the space

// "<0x0A>" -> 10; -1 when the piece is not a byte piece in sentencepiece's spelling
// (uppercase hex, exactly two digits).
int byte_piece_value(std::string_view piece);
// Every "▁" replaced by a space.
std::string replace_space_symbol(std::string_view piece);

}  // namespace llmctl
