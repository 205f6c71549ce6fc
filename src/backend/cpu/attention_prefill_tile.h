#pragma once
// Prefill attention a tile of query tokens at a time: the tile's tokens (of one KV group) read
// the union of their windows chunk by chunk, a chunk of keys staying in L1 while every token of
// the tile reads it: first all the tokens' scores, then each token's softmax, then the values,
// each output's fma chain going on from chunk to chunk. A chunk of a block-type pool (Q8_0,
// Q4_0) is decoded once into per-thread f32 scratch; F32 and F16 rows are read where they lie.
// The untiled kernel (attend_group_fast, attention_fast.h) instead streams every query's rows
// from memory (and decodes every block it reads, in its inner loop, for every query): a tile of
// n tokens at depth p reads (and decodes) about p rows instead of n x p.
//
// Bits: a block element loads as float(q) * d, one rounding (attention_kv_load.h), and the
// scratch holds exactly those values, stored by the very loads the kernel uses; the f32 loops
// over them do the quantized loops' arithmetic, and a score or an output's chain does not
// depend on which keys share its loop (attention_fast.cpp). So every (token, head) has the
// bits attend_group_fast gives it alone: batch and thread invariance, and AVX2 = AVX-512,
// keep holding whatever the tiling (tests/test_attention_prefill_tile.cpp).
//
// With the AVX-512 loops, consecutive tokens take the keys they share in one pass
// (attend_rows_scores_tokens, attend_rows_values_tokens): 2 tokens for groups of 3 heads, 3 for
// groups of 1, 2 or 4 (as two passes of 2 heads). Each K and V row is loaded and converted once
// per pass instead of once per token; the same bits. SmolLM2 (3 heads) pp512 @ d4096, 2
// threads: 1.16x; Gemma 3 (4 heads): its scores and values loops 8 % to 9 % cheaper in
// profiles (BENCHMARKS.md, 2026-12-06 (later)). Groups of 5 or more heads are not paired.
//
// Every cache type tiles. Against the untiled kernel, 2 threads, AVX-512 EPYC, medians of 4
// interleaved runs: SmolLM2 pp512 @ d4096 F16 cache 1.18x, F32 1.24x, pp512 at depth 0 F16
// 1.04x; 1B-shape Q4_0 pp512 @ d2048 F16 1.10x (BENCHMARKS.md, 2026-12-04 (later)). The Q8_0
// cache gained 1.7x when this tile was written.

#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace llmctl::cpu {

// The tile size for a batch of n_tokens over n_kv_heads groups of group_heads heads on
// n_threads, whose tokens see up to max_keys keys: up to 16 tokens, fewer when tiles that large
// would leave under 4 (tile, group) tasks per thread, and fewer when a tile's scores (tokens x
// group_heads x max_keys floats, per thread) would pass 4 MiB (1B-shape at 32k keys: 8 tokens;
// at 128k: 2). 1 means: do not tile. Any size gives the same bits.
int64_t attention_tile_tokens(int64_t n_tokens, int64_t n_kv_heads, int n_threads,
                              int64_t group_heads = 1, int64_t max_keys = 0);

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
