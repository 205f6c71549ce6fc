#include "tokenizer/bpe.h"

#include <algorithm>
#include <limits>

#include "core/error.h"
#include "tokenizer/unicode.h"
#include "tokenizer/utf8.h"

namespace llmctl {

// ---------------------------------------------------------------------------
// GPT-2 byte-level map
// ---------------------------------------------------------------------------

namespace {

bool is_printable_latin1(uint32_t b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct ByteMap {
  std::array<char32_t, 256> to_unicode{};
  std::array<int16_t, 324> to_byte{};  // every mapped code point is < 256 + 68

  ByteMap() {
    to_byte.fill(-1);
    char32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      to_unicode[b] = is_printable_latin1(b) ? char32_t{b} : next++;
      to_byte[to_unicode[b]] = static_cast<int16_t>(b);
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap map;
  return map;
}

}  // namespace

char32_t byte_to_unicode(uint8_t byte) { return byte_map().to_unicode[byte]; }

int unicode_to_byte(char32_t cp) {
  const ByteMap& m = byte_map();
  return cp < m.to_byte.size() ? m.to_byte[cp] : -1;
}

std::string bytes_to_byte_level(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) append_utf8(out, byte_to_unicode(static_cast<uint8_t>(c)));
  return out;
}

bool append_byte_level_bytes(std::string_view text, std::string& out) {
  // Every mapped code point is below U+0144, so it is one byte (ASCII) or two (lead
  // 0xC2..0xC5); anything else cannot be byte-level text. Decoded inline: this runs once per
  // token and merge side at load time (300k times for a Qwen2 vocabulary).
  const ByteMap& m = byte_map();
  const size_t start = out.size();
  for (size_t pos = 0; pos < text.size();) {
    const auto b0 = static_cast<uint8_t>(text[pos]);
    char32_t cp;
    if (b0 < 0x80) {
      cp = b0;
      pos += 1;
    } else if (b0 >= 0xC2 && b0 <= 0xDF && pos + 1 < text.size() &&
               (static_cast<uint8_t>(text[pos + 1]) & 0xC0) == 0x80) {
      cp = (char32_t{b0 & 0x1Fu} << 6) | (static_cast<uint8_t>(text[pos + 1]) & 0x3Fu);
      pos += 2;
    } else {
      out.resize(start);
      return false;
    }
    const int b = cp < m.to_byte.size() ? m.to_byte[cp] : -1;
    if (b < 0) {
      out.resize(start);
      return false;
    }
    out.push_back(static_cast<char>(static_cast<uint8_t>(b)));
  }
  return true;
}

std::optional<std::string> byte_level_to_bytes(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  if (!append_byte_level_bytes(text, out)) return std::nullopt;
  return out;
}

// ---------------------------------------------------------------------------
// BpeModel
// ---------------------------------------------------------------------------

BpeModel::BpeModel(const std::vector<std::optional<std::string>>& token_bytes,
                   const std::vector<Merge>& merges, bool ignore_merges, StartSymbols start)
    : ignore_merges_(ignore_merges), start_(start) {
  if (token_bytes.size() >= static_cast<size_t>(std::numeric_limits<int32_t>::max() / 2))
    throw Error(fmt::format("vocabulary of {} tokens is too large", token_bytes.size()));
  n_vocab_ = static_cast<int32_t>(token_bytes.size());
  ids_.reserve(token_bytes.size() + merges.size() / 4);
  // Both tables are probed at random, one cache miss per probe: each string's hash is taken
  // kLookahead entries ahead and its slot prefetched, then used for the insert.
  constexpr size_t kLookahead = 8;
  std::array<size_t, kLookahead> token_hash{};
  auto token_ahead = [&](size_t id) {
    if (id >= token_bytes.size() || !token_bytes[id]) return;
    token_hash[id % kLookahead] = ByteStringIds::hash(*token_bytes[id]);
    ids_.prefetch(token_hash[id % kLookahead]);
  };
  for (size_t id = 0; id < kLookahead; ++id) token_ahead(id);
  for (size_t id = 0; id < token_bytes.size(); ++id) {
    const size_t h = token_hash[id % kLookahead];
    if (token_bytes[id]) ids_.insert(*token_bytes[id], h, static_cast<int32_t>(id), /*overwrite=*/true);
    token_ahead(id + kLookahead);
  }
  for (uint32_t b = 0; b < 256; ++b) byte_ids_[b] = intern(std::string(1, static_cast<char>(b)));

  merges_.reserve(merges.size());
  struct Hashes {
    size_t left, right, joined;
  };
  std::array<Hashes, kLookahead> merge_hash{};
  std::string joined;
  auto merge_ahead = [&](size_t rank) {
    if (rank >= merges.size()) return;
    const Merge& m = merges[rank];
    joined.assign(m.left).append(m.right);
    Hashes& h = merge_hash[rank % kLookahead];
    h = {ByteStringIds::hash(m.left), ByteStringIds::hash(m.right), ByteStringIds::hash(joined)};
    ids_.prefetch(h.left);
    ids_.prefetch(h.right);
    ids_.prefetch(h.joined);
  };
  struct Pending {
    uint64_t key;
    MergeResult result;
  };
  std::array<Pending, kLookahead> pending{};
  size_t n_pending = 0;
  for (size_t rank = 0; rank < kLookahead; ++rank) merge_ahead(rank);
  std::string merged_bytes;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const Hashes h = merge_hash[rank % kLookahead];
    const Merge& m = merges[rank];
    merge_ahead(rank + kLookahead);
    if (m.left.empty() || m.right.empty()) continue;  // cannot apply to any pair of symbols
    const int32_t left = intern(m.left, h.left);
    const int32_t right = intern(m.right, h.right);
    merged_bytes.assign(m.left).append(m.right);
    const int32_t merged = intern(merged_bytes, h.joined);
    // The pair table too: its slot is loaded now, the entry written kLookahead merges later
    // (the order of emplaces is kept, so a repeated pair keeps its first rank).
    const uint64_t key = pair_key(left, right);
    merges_.prefetch(key);
    Pending& slot = pending[n_pending++ % kLookahead];
    if (n_pending > kLookahead) merges_.emplace(slot.key, slot.result);
    slot = {key, MergeResult{static_cast<int32_t>(rank), merged}};
  }
  for (size_t k = n_pending > kLookahead ? n_pending - kLookahead : 0; k < n_pending; ++k)
    merges_.emplace(pending[k % kLookahead].key, pending[k % kLookahead].result);
}

int32_t BpeModel::intern(std::string_view bytes) { return intern(bytes, ByteStringIds::hash(bytes)); }

int32_t BpeModel::intern(std::string_view bytes, size_t hash) {
  const size_t next = static_cast<size_t>(n_vocab_) + internal_.size();
  if (next >= static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    throw Error("too many BPE merges");
  // One probe: insert keeps the id of bytes already known (a token or an earlier intern).
  const int32_t id = ids_.insert(bytes, hash, static_cast<int32_t>(next), /*overwrite=*/false);
  if (id == static_cast<int32_t>(next)) internal_.emplace_back(bytes);
  return id;
}

void BpeModel::emit(int32_t id, std::vector<int32_t>& out) const {
  if (id < n_vocab_) {
    out.push_back(id);
    return;
  }
  for (char c : internal_[static_cast<size_t>(id - n_vocab_)]) {
    const int32_t byte_id = byte_ids_[static_cast<uint8_t>(c)];
    if (byte_id < n_vocab_) out.push_back(byte_id);
  }
}

namespace {
// std heap order: the top is the lowest rank, then the leftmost pair. A function object, not
// a function pointer, so the heap operations inline it (they dominate long pieces).
struct LowerPriority {
  bool operator()(const BpeModel::Scratch::Candidate& a,
                  const BpeModel::Scratch::Candidate& b) const {
    return a.order > b.order;
  }
};
constexpr LowerPriority lower_priority{};
}  // namespace

bool BpeModel::add_candidate(Scratch& scratch, int32_t left) const {
  if (left < 0) return false;
  const Scratch::Symbol& l = scratch.symbols[static_cast<size_t>(left)];
  if (l.next < 0) return false;
  const Scratch::Symbol& r = scratch.symbols[static_cast<size_t>(l.next)];
  const MergeResult* m = merges_.find(pair_key(l.id, r.id));
  if (m == nullptr) return false;
  const uint64_t order = (static_cast<uint64_t>(m->rank) << 32) | static_cast<uint32_t>(left);
  scratch.heap.push_back({order, l.next, l.id, r.id, m->merged_id});
  return true;
}

void BpeModel::push_candidate(Scratch& scratch, int32_t left) const {
  if (add_candidate(scratch, left))
    std::push_heap(scratch.heap.begin(), scratch.heap.end(), lower_priority);
}

void BpeModel::start_symbols(std::string_view piece, Scratch& scratch) const {
  auto& symbols = scratch.symbols;
  symbols.clear();
  auto push = [&](int32_t id) {
    const auto i = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, i - 1, -1});
    if (i > 0) symbols[static_cast<size_t>(i - 1)].next = i;
  };
  if (start_ == StartSymbols::Bytes) {
    symbols.reserve(piece.size());
    for (const char c : piece) push(byte_ids_[static_cast<uint8_t>(c)]);
    return;
  }
  for (size_t pos = 0; pos < piece.size();) {
    const size_t len = std::max<size_t>(utf8_valid_char_len(piece, pos), 1);
    const int32_t id = ids_.find(piece.substr(pos, len));
    if (id >= 0) {
      push(id);
    } else {
      // Byte fallback: the character's bytes as their own tokens. A merge never applies to
      // them (merge sides are whole characters), so they stay apart as in tokenizers.
      for (size_t k = pos; k < pos + len; ++k) push(byte_ids_[static_cast<uint8_t>(piece[k])]);
    }
    pos += len;
  }
}

void BpeModel::encode(std::string_view piece, std::vector<int32_t>& out, Scratch& scratch) const {
  if (piece.empty()) return;
  if (piece.size() == 1) {
    emit(byte_ids_[static_cast<uint8_t>(piece[0])], out);
    return;
  }
  if (ignore_merges_) {
    const int32_t id = ids_.find(piece);
    if (id >= 0 && id < n_vocab_) {
      out.push_back(id);
      return;
    }
  }
  if (piece.size() >= static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    throw Error("text piece too long to encode");

  start_symbols(piece, scratch);
  auto& symbols = scratch.symbols;
  const auto n = static_cast<int32_t>(symbols.size());
  scratch.heap.clear();
  for (int32_t i = 0; i + 1 < n; ++i) add_candidate(scratch, i);
  std::make_heap(scratch.heap.begin(), scratch.heap.end(), lower_priority);  // O(n)

  // Merge the best pair until none is left. Candidates are never removed from the heap when
  // a neighbour changes; a popped one is applied only if its two symbols are still adjacent
  // and unchanged. Symbol ids at a fixed start index only ever grow longer, so equal ids
  // mean an unchanged symbol.
  while (!scratch.heap.empty()) {
    std::pop_heap(scratch.heap.begin(), scratch.heap.end(), lower_priority);
    const Scratch::Candidate c = scratch.heap.back();
    scratch.heap.pop_back();
    const auto left = static_cast<int32_t>(c.order & 0xFFFFFFFFu);
    Scratch::Symbol& l = symbols[static_cast<size_t>(left)];
    if (l.id != c.left_id || l.next != c.right) continue;
    Scratch::Symbol& r = symbols[static_cast<size_t>(c.right)];
    if (r.id != c.right_id) continue;
    l.id = c.merged_id;
    l.next = r.next;
    if (r.next >= 0) symbols[static_cast<size_t>(r.next)].prev = left;
    r.id = -1;
    push_candidate(scratch, l.prev);
    push_candidate(scratch, left);
  }

  for (int32_t i = 0; i >= 0; i = symbols[static_cast<size_t>(i)].next)
    emit(symbols[static_cast<size_t>(i)].id, out);
}

}  // namespace llmctl
