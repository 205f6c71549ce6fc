#pragma once
// A paged KV layout shaped like prefill, for the prefill attention tests
// (test_kernel_math_prefill.cpp on the CPU, test_gpu_attention_prefill.cpp on the device):
// sequences 0..2 of 45, 83 and 130 positions on shuffled pool blocks, and a batch of 141 query
// tokens (no multiple of 16, 8, 5, 4 or 2 tokens per tile) that mixes a run of one sequence,
// two sequences interleaved token by token, and cached prefixes (first positions 20 and 97).
// With bad tokens: row 3 of the table has a good block, a negative one and one past the pool,
// and five more tokens are added mid-batch: rows -1 and 4 (= n_seq_rows), position -1, a
// position past the row's blocks, and a token of row 3 that reaches its bad blocks.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "paged_layout.h"

namespace llmctl::test {

inline Layout make_prefill_layout(int64_t block_size, int64_t kv_dim, bool bad_tokens) {
  const int64_t lens[3] = {45, 83, 130};
  Layout l{};
  l.block_size = block_size;
  l.kv_dim = kv_dim;
  l.max_blocks = (lens[2] + block_size - 1) / block_size;
  l.n_blocks = 3 * l.max_blocks + 1;
  std::vector<int32_t> order(static_cast<size_t>(l.n_blocks));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(7));
  const int64_t n_rows = bad_tokens ? 4 : 3;
  l.table.assign(static_cast<size_t>(n_rows * l.max_blocks), -1);
  size_t next = 0;
  for (int64_t s = 0; s < 3; ++s) {
    for (int64_t b = 0; b * block_size < lens[s]; ++b)
      l.table[static_cast<size_t>(s * l.max_blocks + b)] = order[next++];
    for (int64_t p = 0; p < lens[s]; ++p)
      l.slots.push_back(static_cast<int32_t>(
          l.table[static_cast<size_t>(s * l.max_blocks + p / block_size)] * block_size +
          p % block_size));
  }
  if (bad_tokens) {
    l.table[static_cast<size_t>(3 * l.max_blocks)] = order[next];
    if (l.max_blocks > 2) l.table[static_cast<size_t>(3 * l.max_blocks + 2)] = 1 << 30;
  }
  auto add = [&l](int32_t s, int32_t p) {
    l.tok_seq.push_back(s);
    l.tok_pos.push_back(p);
  };
  for (int32_t p = 0; p < 37; ++p) add(1, p);
  for (int32_t i = 0; i < 25; ++i) {
    add(0, 20 + i);
    add(2, 97 + i);
  }
  if (bad_tokens) {
    add(-1, 3);
    add(4, 0);
    add(2, -1);
    add(0, static_cast<int32_t>(l.max_blocks * block_size));
    add(3, static_cast<int32_t>(std::min<int64_t>(3 * block_size - 1, 20)));
  }
  for (int32_t p = 37; p < 83; ++p) add(1, p);
  for (int32_t p = 122; p < 130; ++p) add(2, p);
  return l;
}

// A good token: sequences 0..2 at a stored position (the bad tokens above are not).
inline bool prefill_token_good(const Layout& l, int64_t t) {
  const int32_t s = l.tok_seq[static_cast<size_t>(t)], p = l.tok_pos[static_cast<size_t>(t)];
  return s >= 0 && s < 3 && p >= 0 && p / l.block_size < l.max_blocks;
}

}  // namespace llmctl::test
