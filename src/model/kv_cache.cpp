// The paged KV cache's bookkeeping (kv_cache.h): block pool, block tables, prefix sharing.
#include "model/kv_cache.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <initializer_list>
#include <new>
#include <string>

#include "core/byte_size.h"
#include "core/error.h"

namespace llmctl {

namespace {
constexpr uint64_t kChainSeed = 0x9E3779B97F4A7C15ULL;
size_t idx(int64_t i) { return static_cast<size_t>(i); }
}  // namespace

uint64_t host_kv_memory_limit() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  uint64_t kb = 0;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return 0;
}

namespace {
constexpr KvType kKvTypes[] = {KvType::F32, KvType::F16, KvType::Q8_0, KvType::Q4_0};
}  // namespace

const char* kv_type_name(KvType t) {
  switch (t) {
    case KvType::F32:
      return "f32";
    case KvType::F16:
      return "f16";
    case KvType::Q8_0:
      return "q8_0";
    case KvType::Q4_0:
      return "q4_0";
  }
  return "?";
}

std::optional<KvType> kv_type_from_name(std::string_view name) {
  for (const KvType t : kKvTypes)
    if (name == kv_type_name(t)) return t;
  return std::nullopt;
}

std::vector<std::string> kv_type_names() {
  std::vector<std::string> names;
  for (const KvType t : kKvTypes) names.emplace_back(kv_type_name(t));
  return names;
}

BufferType kv_buffer_type(KvType t) {
  switch (t) {
    case KvType::F32:
      return BufferType::F32;
    case KvType::F16:
      return BufferType::F16;
    case KvType::Q8_0:
      return BufferType::Q8_0;
    case KvType::Q4_0:
      return BufferType::Q4_0;
  }
  return BufferType::F32;
}

uint64_t kv_row_bytes(KvType t, int64_t kv_dim) {
  const BufferType bt = kv_buffer_type(t);
  const int64_t be = buffer_block_elems(bt);
  return static_cast<uint64_t>(std::max<int64_t>(kv_dim, 0) / be) * buffer_block_bytes(bt);
}

std::string kv_types_label(const KvCacheOptions& o) {
  if (o.type == kv_v_type(o)) return kv_type_name(o.type);
  return fmt::format("K {} + V {}", kv_type_name(o.type), kv_type_name(kv_v_type(o)));
}

void check_kv_types_head_dim(const KvCacheOptions& o, int64_t head_dim) {
  const bool same = o.type == kv_v_type(o);
  check_kv_type_head_dim(o.type, head_dim, same ? "KV cache type" : "K cache type");
  if (!same) check_kv_type_head_dim(kv_v_type(o), head_dim, "V cache type");
}

void check_kv_type_head_dim(KvType t, int64_t head_dim, const char* which) {
  const int64_t be = buffer_block_elems(kv_buffer_type(t));
  if (head_dim % be != 0)
    throw Error(fmt::format("{} {}: the model's head_dim is {}, not a multiple of {} (a {} block "
                            "holds {} values of one head)",
                            which, kv_type_name(t), head_dim, be, kv_type_name(t), be),
                "use --kv-type f16 (or f32) for this model");
}

namespace {
// The group window of each layer: its window, or 0 without window groups.
std::vector<int32_t> grouped(std::vector<int32_t> layer_windows, const KvCacheOptions& opt) {
  if (!opt.window_groups) std::fill(layer_windows.begin(), layer_windows.end(), 0);
  return layer_windows;
}

// The distinct windows of `layer_windows`, 0 (the full group) first, then ascending.
std::vector<int32_t> group_windows(const std::vector<int32_t>& layer_windows) {
  std::vector<int32_t> w{0};
  for (const int32_t x : layer_windows)
    if (std::find(w.begin(), w.end(), x) == w.end()) w.push_back(x);
  std::sort(w.begin() + 1, w.end());
  return w;
}

uint64_t saturating_product(std::initializer_list<uint64_t> factors) {
  uint64_t total = 1;
  for (const uint64_t f : factors) {
    if (f != 0 && total > UINT64_MAX / f) return UINT64_MAX;
    total *= f;
  }
  return total;
}

uint64_t nonneg(int64_t x) { return static_cast<uint64_t>(std::max<int64_t>(x, 0)); }
}  // namespace

PagedKvCache::PagedKvCache(Backend& backend, const std::vector<int32_t>& windows, int64_t kv_dim,
                           const KvCacheOptions& opt)
    : opt_(opt), kv_dim_(kv_dim) {
  const std::vector<int32_t> layer_windows = grouped(windows, opt);
  if (opt.block_size < 1 || opt.block_size > 65536)
    throw Error(fmt::format("KV cache: block size {} is outside [1, 65536]", opt.block_size));
  if (opt.n_blocks < 1)
    throw Error(fmt::format("KV cache: {} blocks, expected at least 1", opt.n_blocks));
  if (opt.n_blocks > INT32_MAX / opt.block_size)
    throw Error(fmt::format("KV cache: {} blocks of {} positions is more than the {} blocks "
                            "slot numbers can address",
                            opt.n_blocks, opt.block_size, INT32_MAX / opt.block_size),
                "lower -c/--ctx-size or --parallel");
  if (opt.max_chunk < 1 || opt.max_sequences < 0)
    throw Error(fmt::format("KV cache: max_chunk {} and max_sequences {}: expected >= 1 and >= 0",
                            opt.max_chunk, opt.max_sequences));
  const auto n_layers = static_cast<int64_t>(layer_windows.size());
  LLMCTL_ASSERT(n_layers >= 1 && kv_dim >= 1);
  for (const KvType t : {opt.type, kv_v_type(opt)})
    if (kv_dim % buffer_block_elems(kv_buffer_type(t)) != 0)
      throw Error(fmt::format("KV cache: {} rows of {} values are not whole blocks of {}",
                              kv_type_name(t), kv_dim, buffer_block_elems(kv_buffer_type(t))));
  for (const int32_t w : layer_windows) LLMCTL_ASSERT(w >= 0);
  for (const int32_t w : group_windows(layer_windows)) {
    Group g;
    g.window = w;
    g.n_blocks = group_blocks(w, opt);
    g.per_sequence = w > 0 ? window_blocks_per_sequence(w, opt.block_size, opt.max_chunk,
                                                        opt.n_blocks * opt.block_size)
                           : 0;
    groups_.push_back(std::move(g));
  }
  layer_group_.resize(layer_windows.size());
  layer_in_group_.resize(layer_windows.size());
  std::vector<size_t> n_in_group(groups_.size(), 0);
  for (size_t l = 0; l < layer_windows.size(); ++l) {
    const auto g = static_cast<size_t>(
        std::find_if(groups_.begin(), groups_.end(),
                     [&](const Group& x) { return x.window == layer_windows[l]; }) -
        groups_.begin());
    layer_group_[l] = static_cast<int>(g);
    layer_in_group_[l] = n_in_group[g]++;
  }

  const uint64_t need = required_bytes(layer_windows, kv_dim, opt);
  std::string layers;
  for (size_t g = 0; g < groups_.size(); ++g) {
    if (n_in_group[g] == 0) continue;
    if (!layers.empty()) layers += " + ";
    layers += fmt::format("{}{} layers x {} positions", n_in_group[g],
                          groups_[g].window > 0 ? fmt::format(" window-{}", groups_[g].window) : "",
                          groups_[g].n_blocks * opt.block_size);
  }
  const std::string types = kv_types_label(opt);
  const std::string what =
      groups_.size() == 1
          ? fmt::format("KV cache of {} ({} layers x K and V x {} positions x {} dims x {})",
                        format_bytes(need), n_layers, opt.n_blocks * opt.block_size, kv_dim, types)
          : fmt::format("KV cache of {} ({}, K and V x {} dims x {})", format_bytes(need), layers,
                        kv_dim, types);
  const char* hint = opt.type == KvType::F32 || kv_v_type(opt) == KvType::F32
                         ? "lower -c/--ctx-size (or --parallel), or use --kv-type f16 (or q8_0)"
                     : opt.type == KvType::F16 || kv_v_type(opt) == KvType::F16
                         ? "lower -c/--ctx-size (or --parallel), or use --kv-type q8_0 (or q4_0)"
                         : "lower -c/--ctx-size (or --parallel)";
  if (opt.max_bytes != 0 && need > opt.max_bytes)
    throw Error(fmt::format("{} does not fit in the {} available", what, format_bytes(opt.max_bytes)),
                hint);
  const BufferType kt = kv_buffer_type(opt.type), vt = kv_buffer_type(kv_v_type(opt));
  try {
    for (size_t l = 0; l < layer_windows.size(); ++l) {
      Group& g = groups_[static_cast<size_t>(layer_group_[l])];
      const int64_t n = g.n_blocks * opt.block_size * kv_dim;
      g.k.push_back(backend.alloc(n, kt));
      g.v.push_back(backend.alloc(n, vt));
    }
  } catch (const std::bad_alloc&) {
    throw Error(fmt::format("cannot allocate the {}", what), hint);
  } catch (const Error& e) {
    throw Error(fmt::format("cannot allocate the {}: {}", what, e.what()), hint);
  }
  for (Group& g : groups_) {
    g.blocks.resize(idx(g.n_blocks));
    // Lowest ids first out of the free list (back of the vector), for readable block tables.
    for (int64_t b = g.n_blocks - 1; b >= 0; --b) g.free.push_back(static_cast<int32_t>(b));
  }
}

int64_t PagedKvCache::group_blocks(int32_t window, const KvCacheOptions& opt) {
  if (window <= 0 || opt.max_sequences <= 0 || opt.block_size < 1 || opt.max_chunk < 1)
    return opt.n_blocks;
  const int64_t per_seq_blocks = (opt.n_blocks + opt.max_sequences - 1) / opt.max_sequences;
  const int64_t per_seq = window_blocks_per_sequence(window, opt.block_size, opt.max_chunk,
                                                     per_seq_blocks * opt.block_size);
  return std::min(opt.n_blocks, per_seq * opt.max_sequences);
}

uint64_t PagedKvCache::required_bytes(const std::vector<int32_t>& windows, int64_t kv_dim,
                                      const KvCacheOptions& opt) {
  const std::vector<int32_t> layer_windows = grouped(windows, opt);
  uint64_t total = 0;
  for (const int32_t w : group_windows(layer_windows)) {
    const auto layers =
        static_cast<uint64_t>(std::count(layer_windows.begin(), layer_windows.end(), w));
    const uint64_t row = kv_row_bytes(opt.type, kv_dim) + kv_row_bytes(kv_v_type(opt), kv_dim);
    const uint64_t g =
        saturating_product({layers, nonneg(group_blocks(w, opt)), nonneg(opt.block_size), row});
    total = g > UINT64_MAX - total ? UINT64_MAX : total + g;
  }
  return total;
}

uint64_t PagedKvCache::bytes() const {
  uint64_t total = 0;
  for (const Group& g : groups_)
    for (size_t l = 0; l < g.k.size(); ++l)
      total += buffer_bytes(g.k[l].type(), g.k[l].size()) + buffer_bytes(g.v[l].type(), g.v[l].size());
  return total;
}

int64_t PagedKvCache::group_layers(int group) const {
  return static_cast<int64_t>(groups_[static_cast<size_t>(group)].k.size());
}

int64_t PagedKvCache::n_free_blocks(int group) const {
  const Group& g = groups_[static_cast<size_t>(group)];
  return static_cast<int64_t>(g.free.size() + g.evictable.size());
}

Buffer& PagedKvCache::keys(int64_t layer) {
  const auto l = static_cast<size_t>(layer);
  return groups_[static_cast<size_t>(layer_group_[l])].k[layer_in_group_[l]];
}

Buffer& PagedKvCache::values(int64_t layer) {
  const auto l = static_cast<size_t>(layer);
  return groups_[static_cast<size_t>(layer_group_[l])].v[layer_in_group_[l]];
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
  s.windows.resize(groups_.size() - 1);
  return static_cast<int32_t>(i);
}

void PagedKvCache::remove_sequence(int32_t seq) {
  Sequence& s = seq_ref(seq);
  for (const int32_t b : s.blocks) release_block(groups_[0], b);
  release_windows(s);
  s = Sequence{};
}

int64_t PagedKvCache::length(int32_t seq) const { return seq_ref(seq).length; }
int64_t PagedKvCache::max_len(int32_t seq) const { return seq_ref(seq).max_len; }
int64_t PagedKvCache::capacity(int32_t seq) const {
  return static_cast<int64_t>(seq_ref(seq).blocks.size()) * opt_.block_size;
}
const std::vector<int32_t>& PagedKvCache::block_table(int32_t seq, int group) const {
  const Sequence& s = seq_ref(seq);
  LLMCTL_ASSERT(group >= 0 && group < n_groups());
  return group == 0 ? s.blocks : s.windows[static_cast<size_t>(group - 1)].blocks;
}

int32_t PagedKvCache::slot(int32_t seq, int64_t pos, int group) const {
  const Sequence& s = seq_ref(seq);
  const int64_t cap = static_cast<int64_t>(s.blocks.size()) * opt_.block_size;
  if (pos < 0 || pos >= cap)
    throw Error(fmt::format("KV cache: position {} of sequence {} has no slot (capacity {})", pos,
                            seq, cap));
  const int32_t b = block_table(seq, group)[idx(pos / opt_.block_size)];
  if (b == kNoBlock)
    throw Error(
        fmt::format("KV cache: position {} of sequence {} has no block in the window-{} "
                    "layers (not mapped yet, or outside the window)",
                    pos, seq, group_window(group)));
  return static_cast<int32_t>(b * opt_.block_size + pos % opt_.block_size);
}

// ---------------------------------------------------------------------------
// Blocks
// ---------------------------------------------------------------------------
std::optional<int32_t> PagedKvCache::take_block(Group& g) {
  int32_t b = -1;
  if (!g.free.empty()) {
    b = g.free.back();
    g.free.pop_back();
  } else if (!g.evictable.empty()) {  // evict the least recently used cached block
    b = g.evictable.begin()->second;
    g.evictable.erase(g.evictable.begin());
    Block& blk = g.blocks[idx(b)];
    if (g.window == 0) {
      const auto it = prefix_.find(blk.hash);
      if (it != prefix_.end() && it->second == b) prefix_.erase(it);
    } else {
      const auto it = g.copies.find(blk.copy_of);
      if (it != g.copies.end() && it->second == b) g.copies.erase(it);
      blk.copy_of = -1;
    }
    blk.cached = false;
    blk.tokens.clear();
    ++blk.generation;
  } else {
    return std::nullopt;
  }
  Block& blk = g.blocks[idx(b)];
  blk.ref = 1;
  blk.parent = -1;
  blk.last_use = ++tick_;
  return b;
}

void PagedKvCache::release_block(Group& g, int32_t b) {
  Block& blk = g.blocks[idx(b)];
  LLMCTL_ASSERT(blk.ref > 0);
  if (--blk.ref > 0) return;
  blk.last_use = ++tick_;
  if (blk.cached) {
    g.evictable.emplace(blk.last_use, b);
  } else {
    ++blk.generation;  // children registered under it can no longer match
    g.free.push_back(b);
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
  std::vector<Block>& blocks = groups_[0].blocks;
  const int32_t b = s.blocks[idx(block_index)];
  Block& blk = blocks[idx(b)];
  if (blk.cached) return;  // attached from the cache: already registered
  const int32_t parent = block_index > 0 ? s.blocks[idx(block_index - 1)] : -1;
  const uint64_t parent_hash = parent >= 0 ? blocks[idx(parent)].hash : kChainSeed;
  blk.hash = chain_hash(parent_hash, s.tokens.data() + block_index * opt_.block_size);
  blk.parent = parent;
  blk.parent_generation = parent >= 0 ? blocks[idx(parent)].generation : 0;
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
  std::vector<Block>& blocks = groups_[0].blocks;
  // The full blocks that match, in order.
  std::vector<int32_t> matched;
  uint64_t h = kChainSeed;
  int32_t prev = -1;
  for (int64_t i = 0; (i + 1) * bs <= n_tokens - 1 && (i + 1) * bs <= s.max_len; ++i) {
    const int32_t* blk_tokens = tokens.data() + i * bs;
    h = chain_hash(h, blk_tokens);
    const auto it = prefix_.find(h);
    if (it == prefix_.end()) break;
    const int32_t b = it->second;
    const Block& blk = blocks[idx(b)];
    const bool parent_ok =
        blk.parent == prev && (prev < 0 || blk.parent_generation == blocks[idx(prev)].generation);
    if (!blk.cached || !parent_ok || !std::equal(blk.tokens.begin(), blk.tokens.end(), blk_tokens))
      break;
    matched.push_back(b);
    prev = b;
  }
  // As many as the windowed groups can resume from.
  auto k = static_cast<int64_t>(matched.size());
  while (k > 0 && !window_prefix_ok(matched, k)) --k;
  for (int64_t i = 0; i < k; ++i) {
    const int32_t b = matched[idx(i)];
    Block& blk = blocks[idx(b)];
    if (blk.ref == 0) groups_[0].evictable.erase(blk.last_use);
    ++blk.ref;
    blk.last_use = ++tick_;
    s.blocks.push_back(b);
    s.tokens.insert(s.tokens.end(), tokens.begin() + i * bs, tokens.begin() + (i + 1) * bs);
  }
  s.length = k * bs;
  attach_window_blocks(s);
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
  if (need > n_free_blocks(0)) return Reserve::PoolFull;
  const int64_t new_capacity = want * opt_.block_size;
  for (size_t g = 1; g < groups_.size(); ++g) {
    const WindowTable& t = s.windows[g - 1];
    const int64_t q = window_quota(groups_[g], s.length, new_capacity);
    if (groups_[g].quota_sum - t.quota + q > groups_[g].n_blocks) return Reserve::PoolFull;
  }
  for (int64_t i = 0; i < need; ++i) s.blocks.push_back(*take_block(groups_[0]));
  for (size_t g = 1; g < groups_.size(); ++g) {
    WindowTable& t = s.windows[g - 1];
    const int64_t q = window_quota(groups_[g], s.length, new_capacity);
    groups_[g].quota_sum += q - t.quota;
    t.quota = q;
    t.blocks.resize(idx(want), kNoBlock);
  }
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
  commit_windows(s, old_len);
}

}  // namespace llmctl
