#pragma once
// PagedKvCache: the keys and values of every sequence, in pools of fixed-size blocks.
//
//   keys(layer), values(layer): pools (n_blocks * block_size, kv_dim), one row ("slot") per
//   position, of KvCacheOptions::type (K) and v_type() (V): f32, f16, or ggml's Q8_0 / Q4_0
//   blocks of 32 values along each head (backend.h BufferType; head_dim a multiple of 32). A sequence owns a block table: its position j lives in slot
//   block_table[j / block_size] * block_size + j % block_size.
//
// Layer groups (sliding-window attention). Layers that attend to every earlier position (window
// 0) form the full group, group 0: its pools hold every position of every sequence, and its
// block table is the sequence's own (capacity, prefix sharing). Layers with a window W form a
// windowed group per distinct W, with pools of their own and a block table per sequence of the
// same length as the full one, in which only the blocks the window can still see are held: a
// query at position p reads positions p - W + 1 .. p only (backend.h attention_first_position),
// so once the sequence is L long, a block whose positions all lie before L - W + 1 is released
// back to the group (its entry becomes kNoBlock, -1; no backend reads a position outside the
// window, and the CPU paths assert it). A windowed group's blocks are taken as positions are
// written (map_positions(), before each forward pass), not at reserve(): a sequence holds at
// most window_blocks_per_sequence(W, block_size, max_chunk, max_len) of them at a time
// (core/sliding_window.h), and its pools are sized for KvCacheOptions::max_sequences sequences
// of that many, so a long Gemma 3 chat keeps bounded memory in 5 of its 6 layers. reserve()
// still promises every block a sequence will need, so nothing runs out mid-generation: per
// group, the sum over sequences of the most blocks each can hold from now to its capacity (its
// "quota", recomputed at reserve and commit) never exceeds the group's blocks, and since every
// held block is held by some sequence, the blocks not held always cover what the sequences may
// still take. PagedKvCache::required_bytes() and kvplan's llmctl rule (plan/memory_plan.cpp)
// use the same sizing.
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
// Windowed groups share the same way, keyed by the full group: when a full block is registered,
// the windowed block at the same index of the same sequence is registered as its copy (full
// block id and generation). A block the window leaves is released like any other: cached, so
// it stays reusable until its group needs the room. attach_prefix() reuses k full blocks only
// if every windowed group still has the copies of blocks the window at position k * block_size
// sees (the last W - 1 positions), and else tries fewer.

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "core/sliding_window.h"

namespace llmctl {

enum class KvType { F32, F16, Q8_0, Q4_0 };
const char* kv_type_name(KvType t);  // "f32", "f16", "q8_0", "q4_0"
std::optional<KvType> kv_type_from_name(std::string_view name);
// Every name kv_type_from_name() accepts, in the order above.
std::vector<std::string> kv_type_names();
BufferType kv_buffer_type(KvType t);
// Bytes of one row of kv_dim values (kv_dim a multiple of 32 for Q8_0 and Q4_0): kv_dim x 4 or
// 2, or kv_dim / 32 blocks of 34 (Q8_0) or 18 (Q4_0) bytes.
uint64_t kv_row_bytes(KvType t, int64_t kv_dim);
// Throws Error naming the model's head_dim when `t` needs whole 32-value blocks per head and
// head_dim is not a multiple of 32 (`which`: "KV cache type", "K cache type" ...).
void check_kv_type_head_dim(KvType t, int64_t head_dim, const char* which);

struct KvCacheOptions {
  int64_t block_size = 16;  // positions per block
  int64_t n_blocks = 0;     // blocks in the full group's pool (every position of every sequence)
  KvType type = KvType::F16;  // K's type, and V's unless v_type says otherwise
  // V's type when it differs from K's (llama.cpp's -ctv); unset: `type`.
  std::optional<KvType> v_type;
  // Refuse, before allocating anything, pools larger than this many bytes (0: no limit).
  // The caller sets what the backend can hold (host MemAvailable, free device memory), so
  // that a -c too large for the machine is an error naming the amount instead of an
  // allocation that overcommits and dies later.
  uint64_t max_bytes = 0;
  // Windowed groups' pools: sized for this many sequences of n_blocks / max_sequences blocks
  // each (window_blocks_per_sequence() blocks per sequence); 0: as large as the full pool (no
  // saving, for callers that do not say how many sequences they run).
  int64_t max_sequences = 0;
  // The most positions of one sequence that one map_positions() maps (Forward: its batch size).
  int64_t max_chunk = 512;
  // false: every layer in the full group, windowed ones too (they then keep every position, as
  // before layer groups; tests compare the two).
  bool window_groups = true;
};

inline KvType kv_v_type(const KvCacheOptions& o) { return o.v_type.value_or(o.type); }
// "q8_0", or "K q8_0 + V f16" when the types differ (messages, summary lines).
std::string kv_types_label(const KvCacheOptions& o);
// check_kv_type_head_dim() for K's and V's types.
void check_kv_types_head_dim(const KvCacheOptions& o, int64_t head_dim);

// A KvCacheOptions::max_bytes for a cache in host memory (CPU backends): MemAvailable from
// /proc/meminfo, or 0 (no limit) where it cannot be read.
uint64_t host_kv_memory_limit();

// What reserve() found.
enum class Reserve { Ok, ContextFull, PoolFull };

class PagedKvCache {
 public:
  static constexpr int32_t kNoBlock = -1;  // a windowed block-table entry with no block

  // Allocates the pools on `backend` (zero-filled): layer il attends through a window of
  // layer_windows[il] positions (0: every earlier position). Throws Error for a block size,
  // block count or max_chunk below 1, and Error naming the bytes needed when they exceed
  // opt.max_bytes or the backend cannot allocate them.
  PagedKvCache(Backend& backend, const std::vector<int32_t>& layer_windows, int64_t kv_dim,
               const KvCacheOptions& opt);
  // n_layers layers without a window.
  PagedKvCache(Backend& backend, int64_t n_layers, int64_t kv_dim, const KvCacheOptions& opt)
      : PagedKvCache(backend, std::vector<int32_t>(static_cast<size_t>(n_layers), 0), kv_dim, opt) {
  }
  // What the constructor would allocate: over the groups, layers x group_blocks() x
  // block_size x (kv_row_bytes(K type) + kv_row_bytes(V type)). Saturates at UINT64_MAX.
  static uint64_t required_bytes(const std::vector<int32_t>& layer_windows, int64_t kv_dim,
                                 const KvCacheOptions& opt);
  static uint64_t required_bytes(int64_t n_layers, int64_t kv_dim, const KvCacheOptions& opt) {
    return required_bytes(
        std::vector<int32_t>(static_cast<size_t>(std::max<int64_t>(n_layers, 0)), 0), kv_dim, opt);
  }
  // Blocks of the pool of a group with this window (0: the full group, opt.n_blocks).
  static int64_t group_blocks(int32_t window, const KvCacheOptions& opt);

  int64_t block_size() const { return opt_.block_size; }
  KvType type() const { return opt_.type; }  // K's
  KvType v_type() const { return kv_v_type(opt_); }
  int64_t kv_dim() const { return kv_dim_; }
  // Bytes of every pool over every layer.
  uint64_t bytes() const;
  // Positions attach_prefix() has reused so far (for the summary line).
  int64_t n_reused_positions() const { return n_reused_; }

  // -- layer groups (group 0: the full group, present even with no layer) ---------------
  int n_groups() const { return static_cast<int>(groups_.size()); }
  int layer_group(int64_t layer) const { return layer_group_[static_cast<size_t>(layer)]; }
  int32_t group_window(int group) const { return groups_[static_cast<size_t>(group)].window; }
  int64_t group_layers(int group) const;
  int64_t n_blocks(int group = 0) const { return groups_[static_cast<size_t>(group)].n_blocks; }
  // Blocks of the group no sequence holds (cached blocks included: evicted on demand).
  int64_t n_free_blocks(int group = 0) const;

  // -- sequences ------------------------------------------------------------------------
  // A new empty sequence that may hold at most max_len positions (>= 1).
  int32_t add_sequence(int64_t max_len);
  // Releases the sequence's blocks; its full blocks stay cached for later prefixes.
  void remove_sequence(int32_t seq);
  int64_t length(int32_t seq) const;    // positions written and committed
  int64_t capacity(int32_t seq) const;  // positions with a slot reserved
  int64_t max_len(int32_t seq) const;

  // For an empty sequence: attaches cached blocks holding exactly tokens[0 .. k * block_size)
  // and returns k * block_size, the positions that need no computing. At most
  // tokens.size() - 1 positions are reused, so the last token is always computed (its logits
  // are what the caller wants).
  int64_t attach_prefix(int32_t seq, const std::vector<int32_t>& tokens);
  // Makes room for positions length() .. length() + n - 1 in every group. ContextFull when
  // that passes max_len, PoolFull when a group lacks blocks; nothing changes unless Ok.
  Reserve reserve(int32_t seq, int64_t n);
  // Before a forward pass writes positions length() .. length() + n - 1 (reserved; n <=
  // max_chunk): gives them blocks in the windowed groups. Throws Error otherwise.
  void map_positions(int32_t seq, int64_t n);
  // The pool row of position pos (< capacity(); in a windowed group, mapped and in the window).
  int32_t slot(int32_t seq, int64_t pos, int group = 0) const;
  // The forward pass wrote positions length() .. length() + n - 1 with `tokens`: they become
  // part of the sequence, blocks they complete become shareable, and windowed blocks the
  // window has left are released.
  void commit(int32_t seq, const int32_t* tokens, int64_t n);
  const std::vector<int32_t>& block_table(int32_t seq, int group = 0) const;

  Buffer& keys(int64_t layer);
  Buffer& values(int64_t layer);

 private:
  struct Block {
    int32_t ref = 0;          // sequences holding it
    bool cached = false;      // registered (full group: in prefix_; windowed: as a copy)
    uint32_t generation = 0;  // bumped when the block is evicted (invalidates children)
    uint64_t hash = 0;        // chain hash of every token up to the block's end
    int32_t parent = -1;      // previous block in the chain (-1: the first block)
    uint32_t parent_generation = 0;
    std::vector<int32_t> tokens;  // its block_size tokens, when cached
    uint64_t last_use = 0;        // eviction order (LRU)
    // Windowed groups: the full block (id, generation) this block is the windowed copy of.
    int32_t copy_of = -1;
    uint32_t copy_generation = 0;
  };
  struct Group {
    int32_t window = 0;  // 0: the full group
    int64_t n_blocks = 0;
    int64_t per_sequence = 0;  // windowed: the most blocks one sequence holds at once
    std::vector<Buffer> k, v;  // one pool each per layer of the group
    std::vector<Block> blocks;
    std::vector<int32_t> free;                    // ref == 0, not cached
    std::map<uint64_t, int32_t> evictable;        // last_use -> block (ref == 0, cached)
    int64_t quota_sum = 0;                        // windowed: the sequences' quotas
    std::unordered_map<int32_t, int32_t> copies;  // windowed: full block -> its copy here
  };
  struct WindowTable {            // a sequence's table in a windowed group
    std::vector<int32_t> blocks;  // as long as the full table; kNoBlock where none is held
    int64_t first = 0;            // entries before it are released for good
    int64_t quota = 0;            // the most blocks it may hold from now to its capacity
  };
  struct Sequence {
    bool live = false;
    int64_t max_len = 0;
    int64_t length = 0;
    std::vector<int32_t> blocks;       // the full group's table
    std::vector<int32_t> tokens;       // every committed token (to register full blocks)
    std::vector<WindowTable> windows;  // group g's at g - 1
  };

  const Sequence& seq_ref(int32_t seq) const;
  Sequence& seq_ref(int32_t seq);
  // A free block of group g, evicting its least recently used cached one if needed.
  std::optional<int32_t> take_block(Group& g);
  void release_block(Group& g, int32_t b);
  void register_block(Sequence& s, int64_t block_index);
  uint64_t chain_hash(uint64_t parent_hash, const int32_t* tokens) const;
  // Windowed groups (kv_cache_window.cpp).
  int64_t window_first_block(int32_t window, int64_t length) const;
  int64_t window_quota(const Group& g, int64_t length, int64_t capacity) const;
  int32_t window_copy(const Group& g, int32_t full_block) const;  // kNoBlock when none
  bool window_prefix_ok(const std::vector<int32_t>& full_blocks, int64_t k) const;
  void attach_window_blocks(Sequence& s);
  void commit_windows(Sequence& s, int64_t old_length);
  void release_windows(Sequence& s);

  KvCacheOptions opt_;
  int64_t kv_dim_ = 0;
  std::vector<Group> groups_;
  std::vector<int> layer_group_;                  // per layer
  std::vector<size_t> layer_in_group_;            // per layer: its pools' index in the group
  std::unordered_map<uint64_t, int32_t> prefix_;  // chain hash -> cached full block
  std::vector<Sequence> seqs_;
  uint64_t tick_ = 0;
  int64_t n_reused_ = 0;
};

}  // namespace llmctl
