#pragma once
// The two lookup tables behind BpeModel, flat and open-addressed, because std::unordered_map
// of std::string made loading a 150k-token vocabulary with 150k merges cost ~0.2 s in node
// allocations and string copies (perf): byte strings live in one arena and are looked up by
// string_view, pair keys in one array.

#include <cstdint>
#include <limits>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace llmctl {

// Slots for n entries: a power of two, at most 3/4 full. Both tables are filled once at load,
// and halving their size (from 1/2 full) saves a quarter of a Qwen2 vocabulary's load time in
// page faults; the tags and pair keys keep the longer probe runs cheap.
inline size_t table_capacity_for(size_t n) {
  size_t c = 16;
  while (c * 3 < n * 4) c *= 2;
  return c;
}

// Byte string -> id. Strings are copied into one arena; insert keeps the first id unless
// `overwrite` is set.
class ByteStringIds {
 public:
  void reserve(size_t n) {
    entries_.reserve(n);
    rehash(capacity_for(n));
  }
  static size_t hash(std::string_view s) { return std::hash<std::string_view>{}(s); }
  // Starts loading the slot of a string with hash h, so that an insert issued a few steps later
  // finds it in cache (loading a vocabulary probes the table 450k times at random).
  void prefetch(size_t h) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[h & mask_]);
  }
  // -1 when absent.
  int32_t find(std::string_view s) const {
    if (slots_.empty()) return -1;
    const size_t h = std::hash<std::string_view>{}(s);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const uint64_t slot = slots_[i];
      if (slot == kEmptySlot) return -1;
      if (tag(slot) != tag_of(h)) continue;  // most misses never touch the entry
      const Entry& en = entries_[index(slot)];
      if (view(en) == s) return en.id;
    }
  }
  // Sets s -> id (replacing an existing id when overwrite); returns the id now stored.
  int32_t insert(std::string_view s, int32_t id, bool overwrite) { return insert(s, hash(s), id, overwrite); }
  // The same with s's hash (h = hash(s)) computed already.
  int32_t insert(std::string_view s, size_t h, int32_t id, bool overwrite) {
    if (arena_.size() + s.size() > std::numeric_limits<uint32_t>::max())
      throw Error(fmt::format("BPE vocabulary: more than 4 GiB of token bytes (at {} + {})",
                              arena_.size(), s.size()));
    if ((entries_.size() + 1) * 4 > slots_.size() * 3) rehash(capacity_for(entries_.size() + 1));
    size_t i = h & mask_;
    for (;; i = (i + 1) & mask_) {
      const uint64_t slot = slots_[i];
      if (slot == kEmptySlot) break;
      if (tag(slot) != tag_of(h)) continue;
      Entry& en = entries_[index(slot)];
      if (view(en) == s) {
        if (overwrite) en.id = id;
        return en.id;
      }
    }
    slots_[i] = make_slot(h, entries_.size());
    entries_.push_back({static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(s.size()), id});
    arena_.append(s);
    return id;
  }

 private:
  // A slot holds the entry index (low 32 bits) and the hash's high 32 bits as a tag.
  static constexpr uint64_t kEmptySlot = ~uint64_t{0};
  static uint32_t tag_of(size_t h) { return static_cast<uint32_t>(uint64_t{h} >> 32); }
  static uint32_t tag(uint64_t slot) { return static_cast<uint32_t>(slot >> 32); }
  static size_t index(uint64_t slot) { return static_cast<size_t>(slot & 0xFFFFFFFFu); }
  static uint64_t make_slot(size_t h, size_t entry) {
    return (uint64_t{tag_of(h)} << 32) | static_cast<uint32_t>(entry);
  }

  struct Entry {  // 12 bytes: the table is probed at random, so size is cache misses
    uint32_t offset;
    uint32_t size;
    int32_t id;
  };
  std::string_view view(const Entry& e) const {
    return std::string_view(arena_).substr(e.offset, e.size);
  }
  static size_t capacity_for(size_t n) { return table_capacity_for(n); }
  void rehash(size_t capacity) {
    if (capacity <= slots_.size()) return;
    slots_.assign(capacity, kEmptySlot);
    mask_ = capacity - 1;
    for (size_t e = 0; e < entries_.size(); ++e) {
      const size_t h = std::hash<std::string_view>{}(view(entries_[e]));
      size_t i = h & mask_;
      while (slots_[i] != kEmptySlot) i = (i + 1) & mask_;
      slots_[i] = make_slot(h, e);
    }
  }

  std::string arena_;
  std::vector<Entry> entries_;
  std::vector<uint64_t> slots_;
  size_t mask_ = 0;
};

// 64-bit key (never ~0) -> value, insert-if-absent; key and value share a slot (one miss).
template <typename Value>
class PairMap {
 public:
  static constexpr uint64_t kEmpty = ~uint64_t{0};

  void reserve(size_t n) {
    const size_t c = table_capacity_for(n);
    slots_.assign(c, Slot{kEmpty, Value{}});
    mask_ = c - 1;
    size_ = 0;
  }
  // Starts loading the slot of `key` (see ByteStringIds::prefetch).
  void prefetch(uint64_t key) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[slot(key)]);
  }
  const Value* find(uint64_t key) const {
    if (slots_.empty()) return nullptr;
    for (size_t i = slot(key);; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return &slots_[i].value;
      if (slots_[i].key == kEmpty) return nullptr;
    }
  }
  // Keeps an existing value (a repeated merge keeps its first rank).
  void emplace(uint64_t key, const Value& v) {
    if ((size_ + 1) * 4 > slots_.size() * 3) grow();
    size_t i = slot(key);
    while (slots_[i].key != kEmpty) {
      if (slots_[i].key == key) return;
      i = (i + 1) & mask_;
    }
    slots_[i] = Slot{key, v};
    ++size_;
  }
  size_t size() const { return size_; }

 private:
  struct Slot {
    uint64_t key;
    Value value;
  };
  size_t slot(uint64_t key) const {
    return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> 20) & mask_;
  }
  void grow() {
    std::vector<Slot> old;
    old.swap(slots_);
    reserve(old.empty() ? 8 : old.size());
    for (const Slot& s : old)
      if (s.key != kEmpty) emplace(s.key, s.value);
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace llmctl
