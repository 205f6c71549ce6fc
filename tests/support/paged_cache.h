#pragma once
// A paged KV cache for the attention kernels' tests: two sequences in blocks of 4 positions,
// their blocks interleaved and reversed in the pool, filled with random K and V through the
// backend's kv_store, and the K/V pool types the kernels read (each alone and mixed).
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/attention_fast.h"
#include "support/backend_buffers.h"
#include "support/random_data.h"

namespace llmctl::test {

constexpr BufferType kQ8 = BufferType::Q8_0, kQ4 = BufferType::Q4_0, kF16 = BufferType::F16,
                     kF32 = BufferType::F32;

// An attention shape of the tests: heads, KV heads (groups), head dim.
struct Shape {
  int64_t n_heads, n_kv_heads, head_dim;
};

struct PoolTypes {
  BufferType k, v;
};
inline const std::vector<PoolTypes> kPoolTypes = {{kQ8, kQ8}, {kQ4, kQ4},   {kQ8, kF16}, {kF16, kQ4},
                                           {kQ4, kQ8}, {kF32, kQ8},  {kF16, kF16}, {kF32, kF32}};

inline std::string name(PoolTypes t) {
  return std::string("K ") + buffer_type_name(t.k) + " V " + buffer_type_name(t.v);
}

// Two sequences of n_pos positions each in blocks of 4, their blocks interleaved and reversed
// in the pool (sequence r's block b at pool block 2 (n_blocks - 1 - b) + r); a batch of query
// tokens given by (sequence, position).
struct Cache {
  Buffer k_pool, v_pool, table, rows, pos;
  int64_t max_blocks = 0;
  PagedKv kv() const { return PagedKv{&k_pool, &v_pool, 4, &table, max_blocks, &rows, &pos}; }
};

inline Cache make_cache(Backend& be, std::mt19937& rng, int64_t n_pos, int64_t kv_dim, PoolTypes t,
                 const std::vector<int32_t>& rows, const std::vector<int32_t>& positions) {
  Cache c;
  c.max_blocks = (n_pos + 3) / 4;
  c.k_pool = be.alloc(2 * c.max_blocks * 4 * kv_dim, t.k);
  c.v_pool = be.alloc(2 * c.max_blocks * 4 * kv_dim, t.v);
  std::vector<int32_t> table, slots;
  for (int32_t r = 0; r < 2; ++r)
    for (int64_t b = 0; b < c.max_blocks; ++b)
      table.push_back(static_cast<int32_t>(2 * (c.max_blocks - 1 - b) + r));
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t j = 0; j < n_pos; ++j)
      slots.push_back(table[static_cast<size_t>(r * c.max_blocks + j / 4)] * 4 +
                      static_cast<int32_t>(j % 4));
  const auto n = static_cast<int64_t>(slots.size());
  const Buffer k = make(be, random_floats(rng, static_cast<size_t>(n * kv_dim)));
  const Buffer v = make(be, random_floats(rng, static_cast<size_t>(n * kv_dim)));
  be.kv_store(k, v, make_ids(be, slots), n, kv_dim, c.k_pool, c.v_pool);
  c.table = make_ids(be, table);
  c.rows = make_ids(be, rows);
  c.pos = make_ids(be, positions);
  return c;
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

// The per-group kernel's output and statistics for every token of a batch (the tests' yardstick:
// attend_group_fast over each (token, KV group)).
struct GroupResults {
  Buffer out;
  std::vector<float> stats;
};
inline GroupResults attend_every_group(Backend& be, const Buffer& q, const PagedKv& kv,
                                       int64_t n_tok, const AttentionShape& s) {
  GroupResults r{be.alloc(n_tok * s.n_heads * s.head_dim),
                 std::vector<float>(static_cast<size_t>(n_tok * s.n_heads * kAttnStatFields))};
  std::vector<float> scores;
  for (int64_t tok = 0; tok < n_tok; ++tok)
    for (int64_t g = 0; g < s.n_kv_heads; ++g)
      cpu::attend_group_fast(q, kv, tok, g, s, r.out, scores,
                             r.stats.data() + tok * s.n_heads * kAttnStatFields);
  return r;
}

}  // namespace llmctl::test
