// The paged KV cache's windowed layer groups (kv_cache.h): blocks taken as positions are
// written, released once the window has left them, shared through the full group's prefix
// cache, and the quotas that keep every reservation good.
#include <fmt/format.h>

#include "core/error.h"
#include "model/kv_cache.h"

namespace llmctl {

namespace {
size_t idx(int64_t i) { return static_cast<size_t>(i); }
}  // namespace

// The first block a query at position `length` (the next one written) still reads.
int64_t PagedKvCache::window_first_block(int32_t window, int64_t length) const {
  return attention_first_position(length, window) / opt_.block_size;
}

// The most blocks of group g a sequence of `length` positions can hold from now until it is
// `capacity` long: those from its window's first block to its last, and never more than
// g.per_sequence (map_positions maps at most max_chunk positions ahead).
int64_t PagedKvCache::window_quota(const Group& g, int64_t length, int64_t capacity) const {
  if (capacity == 0) return 0;
  const int64_t last = (capacity + opt_.block_size - 1) / opt_.block_size;
  return std::min(g.per_sequence, last - window_first_block(g.window, length));
}

int32_t PagedKvCache::window_copy(const Group& g, int32_t full_block) const {
  const auto it = g.copies.find(full_block);
  if (it == g.copies.end()) return kNoBlock;
  const Block& w = g.blocks[idx(it->second)];
  const uint32_t generation = groups_[0].blocks[idx(full_block)].generation;
  const bool ok = w.cached && w.copy_of == full_block && w.copy_generation == generation;
  return ok ? it->second : kNoBlock;
}

// Whether a sequence resuming after full_blocks[0 .. k) finds, in every windowed group, the
// copies of the blocks its window sees, and room in the group's quotas to hold them.
bool PagedKvCache::window_prefix_ok(const std::vector<int32_t>& full_blocks, int64_t k) const {
  const int64_t length = k * opt_.block_size;
  for (size_t gi = 1; gi < groups_.size(); ++gi) {
    const Group& g = groups_[gi];
    for (int64_t i = window_first_block(g.window, length); i < k; ++i)
      if (window_copy(g, full_blocks[idx(i)]) == kNoBlock) return false;
    if (g.quota_sum + window_quota(g, length, length) > g.n_blocks) return false;
  }
  return true;
}

// After attach_prefix() attached s.blocks: the windowed copies its window sees.
void PagedKvCache::attach_window_blocks(Sequence& s) {
  const auto k = static_cast<int64_t>(s.blocks.size());
  for (size_t gi = 1; gi < groups_.size(); ++gi) {
    Group& g = groups_[gi];
    WindowTable& t = s.windows[gi - 1];
    t.blocks.assign(idx(k), kNoBlock);
    t.first = window_first_block(g.window, s.length);
    for (int64_t i = t.first; i < k; ++i) {
      const int32_t b = window_copy(g, s.blocks[idx(i)]);
      LLMCTL_ASSERT(b != kNoBlock);  // window_prefix_ok checked it
      Block& blk = g.blocks[idx(b)];
      if (blk.ref == 0) g.evictable.erase(blk.last_use);
      ++blk.ref;
      blk.last_use = ++tick_;
      t.blocks[idx(i)] = b;
    }
    t.quota = window_quota(g, s.length, s.length);
    g.quota_sum += t.quota;
  }
}

void PagedKvCache::map_positions(int32_t seq, int64_t n) {
  Sequence& s = seq_ref(seq);
  const int64_t cap = static_cast<int64_t>(s.blocks.size()) * opt_.block_size;
  if (n < 0 || n > opt_.max_chunk || s.length + n > cap)
    throw Error(
        fmt::format("KV cache: mapping {} positions of sequence {} (length {}, capacity "
                    "{}, at most {} at a time)",
                    n, seq, s.length, cap, opt_.max_chunk));
  if (n == 0) return;
  const int64_t bs = opt_.block_size;
  for (size_t gi = 1; gi < groups_.size(); ++gi) {
    WindowTable& t = s.windows[gi - 1];
    for (int64_t i = s.length / bs; i <= (s.length + n - 1) / bs; ++i) {
      if (t.blocks[idx(i)] != kNoBlock) continue;
      const std::optional<int32_t> b = take_block(groups_[gi]);
      // The quotas promised it (kv_cache.h); running out here is a bookkeeping bug.
      LLMCTL_ASSERT(b.has_value());
      t.blocks[idx(i)] = *b;
    }
    int64_t held = 0;
    for (size_t i = idx(t.first); i < t.blocks.size(); ++i) held += t.blocks[i] != kNoBlock;
    LLMCTL_ASSERT(held <= t.quota);
  }
}

// After commit() made s `length` long (from old_length): windowed copies of the full blocks it
// registered, then the blocks the window has left go back (cached when registered), and the
// quota shrinks to what is still ahead.
void PagedKvCache::commit_windows(Sequence& s, int64_t old_length) {
  const int64_t bs = opt_.block_size;
  const int64_t capacity = static_cast<int64_t>(s.blocks.size()) * bs;
  const std::vector<Block>& full = groups_[0].blocks;
  for (size_t gi = 1; gi < groups_.size(); ++gi) {
    Group& g = groups_[gi];
    WindowTable& t = s.windows[gi - 1];
    for (int64_t b = old_length / bs; (b + 1) * bs <= s.length; ++b) {
      const int32_t fb = s.blocks[idx(b)];
      const int32_t wb = t.blocks[idx(b)];
      if (wb == kNoBlock || !full[idx(fb)].cached || window_copy(g, fb) != kNoBlock) continue;
      Block& blk = g.blocks[idx(wb)];
      if (blk.cached) continue;
      blk.cached = true;
      blk.copy_of = fb;
      blk.copy_generation = full[idx(fb)].generation;
      g.copies[fb] = wb;
    }
    const int64_t first = window_first_block(g.window, s.length);
    for (int64_t i = t.first; i < first; ++i) {
      if (t.blocks[idx(i)] != kNoBlock) release_block(g, t.blocks[idx(i)]);
      t.blocks[idx(i)] = kNoBlock;
    }
    t.first = std::max(t.first, first);
    const int64_t q = window_quota(g, s.length, capacity);
    LLMCTL_ASSERT(q <= t.quota);
    g.quota_sum += q - t.quota;
    t.quota = q;
  }
}

void PagedKvCache::release_windows(Sequence& s) {
  for (size_t gi = 1; gi < groups_.size(); ++gi) {
    WindowTable& t = s.windows[gi - 1];
    for (const int32_t b : t.blocks)
      if (b != kNoBlock) release_block(groups_[gi], b);
    groups_[gi].quota_sum -= t.quota;
    t = WindowTable{};
  }
}

}  // namespace llmctl
