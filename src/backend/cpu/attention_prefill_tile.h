#pragma once
// Prefill attention over a quantized KV cache, a tile of query tokens at a time: the K and V
// rows of one KV group that the tile's tokens read (the union of their windows) are decoded
// once into per-thread f32 scratch, and every token of the tile runs attend_rows_fast
// (attention_fast.h) over those rows, instead of decoding each Q8_0 / Q4_0 block it reads in
// its inner loop (a prefill of n tokens at depth p decodes about p rows per tile, not n x p).
//
// Bits: a block element loads as float(q) * d, one rounding (attention_kv_load.h), and the
// scratch holds exactly those values, stored by the very loads the kernel uses; the f32 loops
// over them do the quantized loops' arithmetic. So every (token, head) has the bits
// attend_group_fast gives it alone: batch and thread invariance, and AVX2 = AVX-512, keep
// holding whatever the tiling (tests/test_attention_prefill_tile.cpp).
//
// A pool of type F32 or F16 is read where it lies, as attend_group_fast reads it (only its
// rows' offsets are walked once per tile); a cache with no block-type pool gains nothing here.

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
// token. stats: the batch's (n_tokens, n_heads) rows of kAttnStatFields, or nullptr.
void attend_tile_fast(const Buffer& q, const PagedKv& kv, int64_t t0, int64_t n, int64_t g,
                      const AttentionShape& s, Buffer& out, std::vector<float>& scores,
                      float* stats = nullptr, bool avx512 = true);

}  // namespace llmctl::cpu
