#pragma once
// Prefill attention over a quantized KV cache, a tile of query tokens at a time: the tile's
// tokens (of one KV group) read the union of their windows chunk by chunk, a chunk of keys
// being decoded once into per-thread f32 scratch that stays in L1 while every token of the
// tile reads it: first all the tokens' scores, then each token's softmax, then the values,
// each output's fma chain going on from chunk to chunk. The untiled kernel (attend_group_fast,
// attention_fast.h) instead decodes every Q8_0 / Q4_0 block it reads, in its inner loop, for
// every query, and streams every query's rows from memory: a tile of n tokens at depth p
// decodes and reads about p rows instead of n x p.
//
// Bits: a block element loads as float(q) * d, one rounding (attention_kv_load.h), and the
// scratch holds exactly those values, stored by the very loads the kernel uses; the f32 loops
// over them do the quantized loops' arithmetic, and a score or an output's chain does not
// depend on which keys share its loop (attention_fast.cpp). So every (token, head) has the
// bits attend_group_fast gives it alone: batch and thread invariance, and AVX2 = AVX-512,
// keep holding whatever the tiling (tests/test_attention_prefill_tile.cpp).
//
// A pool of type F32 or F16 (the other pool of a mixed cache) is read where it lies; a cache
// with no block-type pool keeps the untiled kernel.

#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace llmctl::cpu {

// Whether tiling pays for this cache: its K or V pool is of a block type (Q8_0, Q4_0).
bool attention_tile_pays(const PagedKv& kv);

// The tile size for a batch of n_tokens over n_kv_heads groups on n_threads: up to 16 tokens,
// fewer when tiles that large would leave under 4 (tile, group) tasks per thread. 1 means: do
// not tile. Any size gives the same bits.
int64_t attention_tile_tokens(int64_t n_tokens, int64_t n_kv_heads, int n_threads);

// Query tokens t0 .. t0 + n - 1 of the batch, all heads of KV group g, into out (n_tokens,
// n_heads, head_dim) as attend_group_fast writes them, bit for bit. Consecutive tokens of one
// sequence (block-table row) share their decoded rows; a run whose windows' union holds more
// keys than the windows together (far-apart positions under a sliding window) goes token by
// token. `scores` is per-thread scratch, grown to the run's scores (heads per group x the sum of
// its tokens' key counts: 16 x 3 x 4k floats = 768 KiB for SmolLM2 at 4k). stats: the batch's
// (n_tokens, n_heads) rows of kAttnStatFields, or nullptr.
void attend_tile_fast(const Buffer& q, const PagedKv& kv, int64_t t0, int64_t n, int64_t g,
                      const AttentionShape& s, Buffer& out, std::vector<float>& scores,
                      float* stats = nullptr, bool avx512 = true);

}  // namespace llmctl::cpu
