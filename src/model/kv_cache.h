#pragma once
// PagedKvCache: the keys and values of every sequence, in a pool of fixed-size blocks.
//
//   keys(layer), values(layer): pools (n_blocks * block_size, kv_dim), F16 or F32, one row
//   ("slot") per position. A sequence owns a block table: its position j lives in slot
//   block_table[j / block_size] * block_size + j % block_size.
//
// Prefix sharing (as vLLM's automatic prefix caching): a block that a sequence has filled
// completely is registered under its contents: the tokens it holds and, through its parent
// block, every token before them. A later sequence whose prompt starts with the same tokens
// attaches those blocks (reference counted) instead of computing them again. Full blocks are
// never written again, so sharing needs no copy-on-write. A block whose last user is gone
// stays cached until the pool needs it (least recently used first), so sequential requests
// with a common system prompt share it too. Matching is exact: a block matches only if its
// tokens are equal and its parent is the very block (id and generation) matched before it,
// so a hash collision can cost a reuse but never give a wrong one.

#include <cstdint>
#include <map>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"

namespace llmctl {

enum class KvType { F32, F16 };
const char* kv_type_name(KvType t);  // "f32", "f16"
std::optional<KvType> kv_type_from_name(std::string_view name);

struct KvCacheOptions {
  int64_t block_size = 16;  // positions per block
  int64_t n_blocks = 0;     // blocks in the pool
  KvType type = KvType::F16;
  // Refuse, before allocating anything, a pool larger than this many bytes (0: no limit).
  // The caller sets what the backend can hold (host MemAvailable, free device memory), so
  // that a -c too large for the machine is an error naming the amount instead of an
  // allocation that overcommits and dies later.
  uint64_t max_bytes = 0;
};

// A KvCacheOptions::max_bytes for a cache in host memory (CPU backends): MemAvailable from
// /proc/meminfo, or 0 (no limit) where it cannot be read.
uint64_t host_kv_memory_limit();

// What reserve() found.
enum class Reserve { Ok, ContextFull, PoolFull };

class PagedKvCache {
 public:
  // Allocates the pools on `backend` (zero-filled). Throws Error for a block size or block
  // count below 1, and Error naming the bytes needed when they exceed opt.max_bytes or the
  // backend cannot allocate them.
  PagedKvCache(Backend& backend, int64_t n_layers, int64_t kv_dim, const KvCacheOptions& opt);
  // What the constructor would allocate: 2 (K, V) x n_layers x n_blocks x block_size x
  // kv_dim x (2 or 4 bytes). Saturates at UINT64_MAX instead of overflowing.
  static uint64_t required_bytes(int64_t n_layers, int64_t kv_dim, const KvCacheOptions& opt);

  int64_t block_size() const { return opt_.block_size; }
  int64_t n_blocks() const { return opt_.n_blocks; }
  KvType type() const { return opt_.type; }
  int64_t kv_dim() const { return kv_dim_; }
  // Bytes of both pools over every layer.
  uint64_t bytes() const;
  // Blocks no sequence holds (cached prefix blocks included: they are evicted on demand).
  int64_t n_free_blocks() const;
  // Positions attach_prefix() has reused so far (for the summary line).
  int64_t n_reused_positions() const { return n_reused_; }

  // -- sequences ------------------------------------------------------------------------
  // A new empty sequence that may hold at most max_len positions (>= 1).
  int32_t add_sequence(int64_t max_len);
  // Releases the sequence's blocks; its full blocks stay cached for later prefixes.
  void remove_sequence(int32_t seq);
  int64_t length(int32_t seq) const;    // positions written and committed
  int64_t capacity(int32_t seq) const;  // positions with a slot (reserved)
  int64_t max_len(int32_t seq) const;

  // For an empty sequence: attaches cached blocks holding exactly tokens[0 .. k * block_size)
  // and returns k * block_size, the positions that need no computing. At most
  // tokens.size() - 1 positions are reused, so the last token is always computed (its logits
  // are what the caller wants).
  int64_t attach_prefix(int32_t seq, const std::vector<int32_t>& tokens);
  // Makes room for positions length() .. length() + n - 1. ContextFull when that passes
  // max_len, PoolFull when the pool lacks free blocks; nothing changes unless Ok.
  Reserve reserve(int32_t seq, int64_t n);
  // The pool row of position pos (< capacity()).
  int32_t slot(int32_t seq, int64_t pos) const;
  // The forward pass wrote positions length() .. length() + n - 1 with `tokens`: they become
  // part of the sequence, and blocks they complete become shareable.
  void commit(int32_t seq, const int32_t* tokens, int64_t n);
  const std::vector<int32_t>& block_table(int32_t seq) const;

  Buffer& keys(int64_t layer) { return k_[static_cast<size_t>(layer)]; }
  Buffer& values(int64_t layer) { return v_[static_cast<size_t>(layer)]; }

 private:
  struct Block {
    int32_t ref = 0;          // sequences holding it
    bool cached = false;      // registered in prefix_ under `hash`
    uint32_t generation = 0;  // bumped when the block is evicted (invalidates children)
    uint64_t hash = 0;        // chain hash of every token up to the block's end
    int32_t parent = -1;      // previous block in the chain (-1: the first block)
    uint32_t parent_generation = 0;
    std::vector<int32_t> tokens;  // its block_size tokens, when cached
    uint64_t last_use = 0;        // eviction order (LRU)
  };
  struct Sequence {
    bool live = false;
    int64_t max_len = 0;
    int64_t length = 0;
    std::vector<int32_t> blocks;
    std::vector<int32_t> tokens;  // every committed token (to register full blocks)
  };

  const Sequence& seq_ref(int32_t seq) const;
  Sequence& seq_ref(int32_t seq);
  std::optional<int32_t> take_block();  // a free block, evicting a cached one if needed
  void release_block(int32_t b);
  void register_block(Sequence& s, int64_t block_index);
  uint64_t chain_hash(uint64_t parent_hash, const int32_t* tokens) const;

  KvCacheOptions opt_;
  int64_t kv_dim_ = 0;
  std::vector<Buffer> k_, v_;
  std::vector<Block> blocks_;
  std::vector<int32_t> free_;                     // ref == 0, not cached
  std::map<uint64_t, int32_t> evictable_;         // last_use -> block (ref == 0, cached)
  std::unordered_map<uint64_t, int32_t> prefix_;  // chain hash -> cached block
  std::vector<Sequence> seqs_;
  uint64_t tick_ = 0;
  int64_t n_reused_ = 0;
};

}  // namespace llmctl
