#pragma once
// Byte-level BPE: GPT-2's byte <-> unicode character map, and the merge loop over the raw
// bytes of one pre-tokenized piece.
//
// The model works on raw bytes, not on the byte-level strings the vocabulary stores: every
// token and merge side is mapped back to bytes once at load time, so encoding needs no
// per-character string work. Merge sides and results that are not tokens themselves get
// internal ids past the vocabulary, so a vocabulary whose merges pass through non-tokens
// still encodes as the string-based reference (llama.cpp) does.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/bpe_tables.h"

namespace llmctl {

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes ('!'..'~', U+00A1..U+00AC,
// U+00AE..U+00FF) stand for themselves; the other 68 bytes map, in byte order, to U+0100...
char32_t byte_to_unicode(uint8_t byte);
// The inverse; -1 for a code point that is not one of the 256.
int unicode_to_byte(char32_t cp);
// Raw bytes -> the byte-level string ("Hello world" -> "HelloĠworld").
std::string bytes_to_byte_level(std::string_view bytes);
// Byte-level string -> raw bytes; nullopt when a character is not one of the 256 (or the
// text is not valid UTF-8).
std::optional<std::string> byte_level_to_bytes(std::string_view text);
// The same appended to out; false (out unchanged) when the text is not byte-level.
bool append_byte_level_bytes(std::string_view text, std::string& out);

class BpeModel {
 public:
  struct Merge {  // views into storage the caller keeps until the constructor returns
    std::string_view left;   // raw bytes
    std::string_view right;  // raw bytes
  };

  // token_bytes[id]: the raw bytes token `id` stands for, or nullopt when BPE can never
  // produce it (its text is not byte-level). When two tokens share bytes, the later id wins.
  // merges: in rank order (rank = index); a repeated pair keeps its first rank.
  // ignore_merges: a piece that is a token as a whole becomes that token without merging
  // (Llama 3's tokenizer.json sets it; llama.cpp does the same for its pre-tokenizer).
  // Start symbols: what a piece is cut into before merging. Bytes for byte-level BPE (GPT-2
  // style); UTF-8 characters for BPE over text (SentencePiece-style tokenizer.json: Llama 2,
  // Gemma), where a character that is no token falls back to its bytes' tokens (byte_fallback,
  // token_bytes of "<0x41>" is "A") and never merges.
  enum class StartSymbols { Bytes, Utf8Chars };
  BpeModel(const std::vector<std::optional<std::string>>& token_bytes,
           const std::vector<Merge>& merges, bool ignore_merges,
           StartSymbols start = StartSymbols::Bytes);

  // Reusable buffers for encode(), so one call per piece allocates nothing in steady state.
  struct Scratch {
    struct Symbol {
      int32_t id;    // -1 once merged into its left neighbour
      int32_t prev;  // index of the previous live symbol, -1 at the start
      int32_t next;  // index of the next live symbol, -1 at the end
    };
    struct Candidate {
      uint64_t order;   // rank << 32 | left symbol index: lower ranks first, then leftmost
      int32_t right;    // right symbol index
      int32_t left_id;  // the ids when queued: a stale candidate no longer matches them
      int32_t right_id;
      int32_t merged_id;
    };
    std::vector<Symbol> symbols;
    std::vector<Candidate> heap;
  };

  // Appends the ids of one piece (raw bytes). Lowest merge rank first; among equal ranks
  // the leftmost pair. A final symbol that is not a token falls back to its single-byte
  // tokens (bytes without a token are dropped, as llama.cpp does).
  void encode(std::string_view piece, std::vector<int32_t>& out, Scratch& scratch) const;

  int32_t n_vocab() const { return n_vocab_; }

 private:
  struct MergeResult {
    int32_t rank;
    int32_t merged_id;
  };
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  int32_t intern(std::string_view bytes);
  int32_t intern(std::string_view bytes, size_t hash);  // hash = ByteStringIds::hash(bytes)
  void emit(int32_t id, std::vector<int32_t>& out) const;
  // Queues the pair (left, its next symbol) when a merge exists for it; push_candidate
  // also restores the heap order.
  bool add_candidate(Scratch& scratch, int32_t left) const;
  void push_candidate(Scratch& scratch, int32_t left) const;

  // Appends the start symbols of piece: one per byte, or one per UTF-8 character.
  void start_symbols(std::string_view piece, Scratch& scratch) const;

  int32_t n_vocab_ = 0;
  bool ignore_merges_ = false;
  StartSymbols start_ = StartSymbols::Bytes;
  ByteStringIds ids_;                  // raw bytes -> id (tokens and internal)
  std::vector<std::string> internal_;  // bytes of internal id n_vocab_ + i
  std::array<int32_t, 256> byte_ids_{};           // the symbol each byte starts as
  PairMap<MergeResult> merges_;
};

}  // namespace llmctl
