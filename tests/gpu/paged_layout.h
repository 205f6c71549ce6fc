#pragma once
// A paged KV cache for the attention tests (test_gpu_attention.cpp, test_gpu_attention_stats.cpp):
// three sequences whose blocks are scattered over the pool, filled through kv_store, and a batch
// of query tokens at some positions of each.
#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "backend_pair.h"

namespace llmctl::test {

// A paged cache of three sequences on one backend, filled through kv_store, and a batch of
// query tokens (some positions of each sequence).
struct PagedSetup {
  Buffer k_pool, v_pool, block_table, token_seq, positions;
  int64_t block_size = 0, max_blocks = 0;
  // Built on demand: the object may have been moved since fill() returned it.
  PagedKv kv() const {
    return PagedKv{&k_pool, &v_pool, block_size, &block_table, max_blocks, &token_seq, &positions};
  }
};

struct Layout {
  int64_t block_size, n_blocks, max_blocks, kv_dim;
  std::vector<int32_t> table;  // (3, max_blocks)
  std::vector<int32_t> slots;  // slot of each stored row
  std::vector<int32_t> tok_seq, tok_pos;
};

// Sequences of lengths 1, 17 and 70 whose blocks are scattered over the pool in random order.
inline Layout make_layout(int64_t block_size, int64_t kv_dim) {
  const std::vector<int64_t> lens{1, 17, 70};
  Layout l;
  l.block_size = block_size;
  l.kv_dim = kv_dim;
  l.max_blocks = (70 + block_size - 1) / block_size;
  l.n_blocks = 3 * l.max_blocks + 2;
  std::vector<int32_t> free(static_cast<size_t>(l.n_blocks));
  std::iota(free.begin(), free.end(), 0);
  std::shuffle(free.begin(), free.end(), std::mt19937(42));
  l.table.assign(static_cast<size_t>(3 * l.max_blocks), -1);
  size_t next = 0;
  for (int64_t s = 0; s < 3; ++s) {
    for (int64_t b = 0; b * block_size < lens[static_cast<size_t>(s)]; ++b)
      l.table[static_cast<size_t>(s * l.max_blocks + b)] = free[next++];
    for (int64_t p = 0; p < lens[static_cast<size_t>(s)]; ++p)
      l.slots.push_back(l.table[static_cast<size_t>(s * l.max_blocks + p / block_size)] *
                            static_cast<int32_t>(block_size) +
                        static_cast<int32_t>(p % block_size));
  }
  // Queries: the last position of each sequence and a few earlier ones, interleaved.
  l.tok_seq = {1, 0, 2, 2, 1, 2, 2};
  l.tok_pos = {16, 0, 69, 0, 3, 15, 16};
  return l;
}

// K and V pools of their own types (llama.cpp's -ctk / -ctv).
inline PagedSetup fill(Backend& b, const Layout& l, BufferType k_type, BufferType v_type,
                       const std::vector<float>& k, const std::vector<float>& v) {
  PagedSetup s;
  const int64_t n_rows = static_cast<int64_t>(l.slots.size());
  s.k_pool = b.alloc(l.n_blocks * l.block_size * l.kv_dim, k_type);
  s.v_pool = b.alloc(l.n_blocks * l.block_size * l.kv_dim, v_type);
  Buffer bk = make_f32(b, k), bv = make_f32(b, v), slots = make_i32(b, l.slots);
  b.kv_store(bk, bv, slots, n_rows, l.kv_dim, s.k_pool, s.v_pool);
  s.block_table = make_i32(b, l.table);
  s.token_seq = make_i32(b, l.tok_seq);
  s.positions = make_i32(b, l.tok_pos);
  s.block_size = l.block_size;
  s.max_blocks = l.max_blocks;
  b.sync();
  return s;
}

inline PagedSetup fill(Backend& b, const Layout& l, BufferType pool_type,
                       const std::vector<float>& k, const std::vector<float>& v) {
  return fill(b, l, pool_type, pool_type, k, v);
}

}  // namespace llmctl::test
