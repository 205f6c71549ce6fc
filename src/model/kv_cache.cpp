// The paged KV cache's bookkeeping (kv_cache.h): block pool, block tables, prefix sharing.
#include "model/kv_cache.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <new>
#include <string>

#include "core/error.h"

namespace llmctl {

namespace {
constexpr uint64_t kChainSeed = 0x9E3779B97F4A7C15ULL;
size_t idx(int64_t i) { return static_cast<size_t>(i); }
std::string human_size(uint64_t n) {
  const auto x = static_cast<double>(n);
  if (n >= (1ull << 30)) return fmt::format("{:.2f} GiB", x / static_cast<double>(1ull << 30));
  if (n >= (1ull << 20)) return fmt::format("{:.2f} MiB", x / static_cast<double>(1ull << 20));
  return fmt::format("{} bytes", n);
}
}  // namespace

uint64_t host_kv_memory_limit() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  uint64_t kb = 0;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return 0;
}

const char* kv_type_name(KvType t) { return t == KvType::F16 ? "f16" : "f32"; }

std::optional<KvType> kv_type_from_name(std::string_view name) {
  if (name == "f16") return KvType::F16;
  if (name == "f32") return KvType::F32;
  return std::nullopt;
}

PagedKvCache::PagedKvCache(Backend& backend, int64_t n_layers, int64_t kv_dim,
                           const KvCacheOptions& opt)
    : opt_(opt), kv_dim_(kv_dim) {
  if (opt.block_size < 1 || opt.block_size > 65536)
    throw Error(fmt::format("KV cache: block size {} is outside [1, 65536]", opt.block_size));
  if (opt.n_blocks < 1)
    throw Error(fmt::format("KV cache: {} blocks, expected at least 1", opt.n_blocks));
  if (opt.n_blocks > INT32_MAX / opt.block_size)
    throw Error(fmt::format("KV cache: {} blocks of {} positions is more than the {} blocks "
                            "slot numbers can address",
                            opt.n_blocks, opt.block_size, INT32_MAX / opt.block_size),
                "lower -c/--ctx-size or --parallel");
  LLMCTL_ASSERT(n_layers >= 1 && kv_dim >= 1);
  const uint64_t need = required_bytes(n_layers, kv_dim, opt);
  const std::string what = fmt::format(
      "KV cache of {} ({} layers x K and V x {} positions x {} dims x {})", human_size(need),
      n_layers, opt.n_blocks * opt.block_size, kv_dim, kv_type_name(opt.type));
  const char* hint = opt.type == KvType::F32
                         ? "lower -c/--ctx-size (or --parallel), or use --kv-type f16"
                         : "lower -c/--ctx-size (or --parallel)";
  if (opt.max_bytes != 0 && need > opt.max_bytes)
    throw Error(fmt::format("{} does not fit in the {} available", what, human_size(opt.max_bytes)),
                hint);
  const BufferType bt = opt.type == KvType::F16 ? BufferType::F16 : BufferType::F32;
  const int64_t n = opt.n_blocks * opt.block_size * kv_dim;
  try {
    for (int64_t l = 0; l < n_layers; ++l) {
      k_.push_back(backend.alloc(n, bt));
      v_.push_back(backend.alloc(n, bt));
    }
  } catch (const std::bad_alloc&) {
    throw Error(fmt::format("cannot allocate the {}", what), hint);
  } catch (const Error& e) {
    throw Error(fmt::format("cannot allocate the {}: {}", what, e.what()), hint);
  }
  blocks_.resize(idx(opt.n_blocks));
  // Lowest ids first out of the free list (back of the vector), for readable block tables.
  for (int64_t b = opt.n_blocks - 1; b >= 0; --b) free_.push_back(static_cast<int32_t>(b));
}

uint64_t PagedKvCache::required_bytes(int64_t n_layers, int64_t kv_dim, const KvCacheOptions& opt) {
  const uint64_t factors[] = {2,
                              static_cast<uint64_t>(std::max<int64_t>(n_layers, 0)),
                              static_cast<uint64_t>(std::max<int64_t>(opt.n_blocks, 0)),
                              static_cast<uint64_t>(std::max<int64_t>(opt.block_size, 0)),
                              static_cast<uint64_t>(std::max<int64_t>(kv_dim, 0)),
                              opt.type == KvType::F16 ? 2u : 4u};
  uint64_t total = 1;
  for (const uint64_t f : factors) {
    if (f != 0 && total > UINT64_MAX / f) return UINT64_MAX;
    total *= f;
  }
  return total;
}

uint64_t PagedKvCache::bytes() const {
  uint64_t total = 0;
  for (size_t l = 0; l < k_.size(); ++l)
    total += static_cast<uint64_t>(k_[l].size() + v_[l].size()) * buffer_type_size(k_[l].type());
  return total;
}

int64_t PagedKvCache::n_free_blocks() const {
  return static_cast<int64_t>(free_.size() + evictable_.size());
}

// ---------------------------------------------------------------------------
// Sequences
// ---------------------------------------------------------------------------
const PagedKvCache::Sequence& PagedKvCache::seq_ref(int32_t seq) const {
  if (seq < 0 || static_cast<size_t>(seq) >= seqs_.size() || !seqs_[idx(seq)].live)
    throw Error(fmt::format("KV cache: no sequence {}", seq));
  return seqs_[idx(seq)];
}

PagedKvCache::Sequence& PagedKvCache::seq_ref(int32_t seq) {
  return const_cast<Sequence&>(static_cast<const PagedKvCache*>(this)->seq_ref(seq));
}

int32_t PagedKvCache::add_sequence(int64_t max_len) {
  if (max_len < 1) throw Error(fmt::format("KV cache: sequence length {} must be >= 1", max_len));
  size_t i = 0;
  while (i < seqs_.size() && seqs_[i].live) ++i;
  if (i == seqs_.size()) seqs_.emplace_back();
  Sequence& s = seqs_[i];
  s = Sequence{};
  s.live = true;
  s.max_len = max_len;
  return static_cast<int32_t>(i);
}

void PagedKvCache::remove_sequence(int32_t seq) {
  Sequence& s = seq_ref(seq);
  for (const int32_t b : s.blocks) release_block(b);
  s = Sequence{};
}

int64_t PagedKvCache::length(int32_t seq) const { return seq_ref(seq).length; }
int64_t PagedKvCache::max_len(int32_t seq) const { return seq_ref(seq).max_len; }
int64_t PagedKvCache::capacity(int32_t seq) const {
  return static_cast<int64_t>(seq_ref(seq).blocks.size()) * opt_.block_size;
}
const std::vector<int32_t>& PagedKvCache::block_table(int32_t seq) const {
  return seq_ref(seq).blocks;
}

int32_t PagedKvCache::slot(int32_t seq, int64_t pos) const {
  const Sequence& s = seq_ref(seq);
  if (pos < 0 || pos >= static_cast<int64_t>(s.blocks.size()) * opt_.block_size)
    throw Error(fmt::format("KV cache: position {} of sequence {} has no slot (capacity {})", pos,
                            seq, static_cast<int64_t>(s.blocks.size()) * opt_.block_size));
  return static_cast<int32_t>(s.blocks[idx(pos / opt_.block_size)] * opt_.block_size +
                              pos % opt_.block_size);
}

// ---------------------------------------------------------------------------
// Blocks
// ---------------------------------------------------------------------------
std::optional<int32_t> PagedKvCache::take_block() {
  int32_t b = -1;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else if (!evictable_.empty()) {  // evict the least recently used cached block
    b = evictable_.begin()->second;
    evictable_.erase(evictable_.begin());
    Block& blk = blocks_[idx(b)];
    const auto it = prefix_.find(blk.hash);
    if (it != prefix_.end() && it->second == b) prefix_.erase(it);
    blk.cached = false;
    blk.tokens.clear();
    ++blk.generation;
  } else {
    return std::nullopt;
  }
  Block& blk = blocks_[idx(b)];
  blk.ref = 1;
  blk.parent = -1;
  blk.last_use = ++tick_;
  return b;
}

void PagedKvCache::release_block(int32_t b) {
  Block& blk = blocks_[idx(b)];
  LLMCTL_ASSERT(blk.ref > 0);
  if (--blk.ref > 0) return;
  blk.last_use = ++tick_;
  if (blk.cached) {
    evictable_.emplace(blk.last_use, b);
  } else {
    ++blk.generation;  // children registered under it can no longer match
    free_.push_back(b);
  }
}

uint64_t PagedKvCache::chain_hash(uint64_t parent_hash, const int32_t* tokens) const {
  uint64_t h = parent_hash;
  for (int64_t i = 0; i < opt_.block_size; ++i) {
    h ^= static_cast<uint32_t>(tokens[i]);
    h *= 0x100000001B3ULL;
    h ^= h >> 29;
  }
  return h;
}

void PagedKvCache::register_block(Sequence& s, int64_t block_index) {
  const int32_t b = s.blocks[idx(block_index)];
  Block& blk = blocks_[idx(b)];
  if (blk.cached) return;  // attached from the cache: already registered
  const int32_t parent = block_index > 0 ? s.blocks[idx(block_index - 1)] : -1;
  const uint64_t parent_hash = parent >= 0 ? blocks_[idx(parent)].hash : kChainSeed;
  blk.hash = chain_hash(parent_hash, s.tokens.data() + block_index * opt_.block_size);
  blk.parent = parent;
  blk.parent_generation = parent >= 0 ? blocks_[idx(parent)].generation : 0;
  // The same contents computed twice (two sequences prefilled together): keep the first.
  if (prefix_.count(blk.hash) != 0) return;
  prefix_.emplace(blk.hash, b);
  blk.cached = true;
  const auto first = s.tokens.begin() + block_index * opt_.block_size;
  blk.tokens.assign(first, first + opt_.block_size);
}

int64_t PagedKvCache::attach_prefix(int32_t seq, const std::vector<int32_t>& tokens) {
  Sequence& s = seq_ref(seq);
  if (s.length != 0 || !s.blocks.empty())
    throw Error(fmt::format("KV cache: attach_prefix on sequence {} that is not empty", seq));
  const int64_t bs = opt_.block_size;
  const auto n_tokens = static_cast<int64_t>(tokens.size());
  uint64_t h = kChainSeed;
  int32_t prev = -1;
  for (int64_t i = 0; (i + 1) * bs <= n_tokens - 1 && (i + 1) * bs <= s.max_len; ++i) {
    const int32_t* blk_tokens = tokens.data() + i * bs;
    h = chain_hash(h, blk_tokens);
    const auto it = prefix_.find(h);
    if (it == prefix_.end()) break;
    const int32_t b = it->second;
    Block& blk = blocks_[idx(b)];
    const bool parent_ok =
        blk.parent == prev && (prev < 0 || blk.parent_generation == blocks_[idx(prev)].generation);
    if (!blk.cached || !parent_ok || !std::equal(blk.tokens.begin(), blk.tokens.end(), blk_tokens))
      break;
    if (blk.ref == 0) evictable_.erase(blk.last_use);
    ++blk.ref;
    blk.last_use = ++tick_;
    s.blocks.push_back(b);
    s.tokens.insert(s.tokens.end(), blk_tokens, blk_tokens + bs);
    s.length += bs;
    prev = b;
  }
  n_reused_ += s.length;
  return s.length;
}

Reserve PagedKvCache::reserve(int32_t seq, int64_t n) {
  Sequence& s = seq_ref(seq);
  LLMCTL_ASSERT(n >= 0);
  if (s.length + n > s.max_len) return Reserve::ContextFull;
  const int64_t want = (s.length + n + opt_.block_size - 1) / opt_.block_size;
  const int64_t need = want - static_cast<int64_t>(s.blocks.size());
  if (need <= 0) return Reserve::Ok;
  if (need > n_free_blocks()) return Reserve::PoolFull;
  for (int64_t i = 0; i < need; ++i) s.blocks.push_back(*take_block());
  return Reserve::Ok;
}

void PagedKvCache::commit(int32_t seq, const int32_t* tokens, int64_t n) {
  Sequence& s = seq_ref(seq);
  if (s.length + n > capacity(seq))
    throw Error(fmt::format("KV cache: commit of {} positions past sequence {}'s capacity {}", n,
                            seq, capacity(seq)));
  s.tokens.insert(s.tokens.end(), tokens, tokens + n);
  const int64_t old_len = s.length;
  s.length += n;
  for (int64_t b = old_len / opt_.block_size; (b + 1) * opt_.block_size <= s.length; ++b)
    register_block(s, b);
}

}  // namespace llmctl
