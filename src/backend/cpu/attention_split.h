#pragma once
// Attention of a few query tokens with their work split evenly over the threads: the fast CPU
// backend's path for decode when its (token, KV group) tasks are too few to share out (SmolLM2
// has 3 KV groups, Gemma 3 one: at one token, 2 threads ran 2 groups against 1, or 1 against
// nothing, and attention is most of a step at long contexts).
//
// Three passes over the pool, each split into equal parts, each part's arithmetic that of
// attend_group_fast (attention_fast.h), so every output and statistic has its bits whatever the
// thread count (batch and thread invariance, backend.h):
//   1. scores   (token, group, chunk of kKeysPerTask keys): every score is its own dot product,
//               so any split of the keys gives the same bits; the chunk also finds its rows'
//               offsets in the pools.
//   2. softmax  (token, head): the soft-cap, softmax with sinks and statistics of one row of
//               scores, as attend_rows_softmax does it.
//   3. values   (token, group, slice of the head's dimensions): each output element is one fma
//               chain over all keys in order, so splitting the dimensions keeps every chain
//               whole (attend_rows_values_dims).

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/attention_fast.h"
#include "backend/cpu/thread_pool.h"

namespace llmctl::cpu {

// Scratch of attend_split, kept by the backend between calls (no allocation per step).
struct SplitAttentionScratch {
  // A query token's keys and where its rows lie below: its first head's row of scores, its
  // first group's offsets.
  struct Token {
    QueryKeys keys;
    int64_t scores, offsets;
  };
  // A scores task: keys j0 .. j1 - 1 of token t's group g.
  struct KeyChunk {
    int64_t t, g, j0, j1;
  };
  std::vector<Token> tokens;
  std::vector<KeyChunk> chunks;
  std::vector<float> scores;         // per (token, head): its row of scores, then weights
  std::vector<size_t> k_off, v_off;  // per (token, group): its rows' offsets (attention_fast.h)
};

// Whether attend_split spreads n_tokens query tokens better than (token, group) tasks do on
// n_threads threads: when those tasks are fewer than 4 per thread and do not divide evenly.
bool attention_split_pays(int64_t n_tokens, const AttentionShape& s, int n_threads);

// out (n_tokens, n_heads, head_dim) = attention of q's tokens over the cache (Backend::attention),
// bit-identical to attend_group_fast over every (token, group); stats (n_tokens, n_heads,
// kAttnStatFields) too when non-null. avx512: attend_group_fast's flag.
void attend_split(const Buffer& q, const PagedKv& kv, int64_t n_tokens, const AttentionShape& s,
                  Buffer& out, float* stats, bool avx512, ThreadPool& pool,
                  SplitAttentionScratch& scratch);

}  // namespace llmctl::cpu
