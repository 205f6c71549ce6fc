#pragma once
// The index math of kernels/attention_prefill.cu as __host__ __device__ inline functions, so
// tests/gpu/test_kernel_math_prefill.cpp runs exactly this code on the CPU (no GPU needed):
// the launch geometry, which (token, head) each warp takes, the distinct sequences of a block's
// tokens, the bounds checks, and which staged positions a query consumes. The softmax itself is
// attention_math.cuh's (online_softmax_step, merge_softmax), shared with attention_paged.cu.
//
// Geometry. A block takes one KV head g, `heads_per_block` of the query heads that share it
// (GQA group of n_heads / n_kv_heads) and `tokens_per_block` consecutive batch tokens: one warp
// per (token, head) pair, at most kPrefillMaxWarps pairs. K/V rows of head g are staged in shared
// memory as f32, kv_rows positions at a time, and every warp of the block reads them there:
// each K/V element is read from global memory once per block instead of once per pair.
//
// Bitwise equality with attention_paged.cu. The paged kernel gives position j of a query to
// warp j % 4 (kWarps = 4), each warp keeping its own online softmax over its positions in
// increasing order, and merges the 4 in warp order. Here one warp keeps those 4 states
// (residues) itself and feeds position j into state j % kPrefillResidues, positions in
// increasing order; tiles start at multiples of kv_rows, itself a multiple of 4, so position
// j0 + jj of a tile goes to state jj % 4. The lanes split head_dim as the paged kernel's do, so
// each score, each state and the merge are the same operations on the same values: a query's
// output is bit-identical to the paged kernel's, whatever the batch around it. (That assumes
// nvcc turns the same statements into the same instructions in both kernels: no fast-math, and
// the PTX of the score step has the same shape in both; test_gpu_attention_prefill.cpp checks
// the bits on the device.)

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/kernels.h"

namespace llmctl::cuda {

constexpr int kPrefillResidues = 4;       // = attention_paged.cu's kWarps (see above)
constexpr int kPrefillMaxWarps = 16;      // (token, head) pairs per block, one warp each
constexpr int kPrefillTileFloats = 4096;  // staged K (and V) floats per tile: 16 KiB each
constexpr int kPrefillMaxKvRows = 64;     // positions per tile for small heads
static_assert(kPrefillTileFloats / kAttentionMaxHeadDim >= kPrefillResidues,
              "a tile must hold at least kPrefillResidues rows of the largest head");

struct PrefillPlan {
  int heads_per_block;   // query heads of one KV group per block, 1 .. kPrefillMaxWarps
  int tokens_per_block;  // consecutive batch tokens per block
  int head_chunks;       // blocks per KV group: ceil(group / heads_per_block)
  int warps;             // heads_per_block * tokens_per_block <= kPrefillMaxWarps
  int kv_rows;           // positions per staged tile: a multiple of kPrefillResidues
};

// Requires n_kv_heads >= 1 dividing n_heads and 1 <= head_dim <= kAttentionMaxHeadDim (the
// backend checks both). Grid: (ceil(n_tokens / tokens_per_block), n_kv_heads * head_chunks).
__host__ __device__ inline PrefillPlan plan_prefill(int64_t n_heads, int64_t n_kv_heads,
                                                    int64_t head_dim) {
  const int64_t group = n_heads / n_kv_heads;
  PrefillPlan p{};
  p.heads_per_block = static_cast<int>(group < kPrefillMaxWarps ? group : kPrefillMaxWarps);
  p.tokens_per_block = kPrefillMaxWarps / p.heads_per_block;
  p.head_chunks = static_cast<int>((group + p.heads_per_block - 1) / p.heads_per_block);
  p.warps = p.heads_per_block * p.tokens_per_block;
  int64_t rows = kPrefillTileFloats / head_dim;
  if (rows > kPrefillMaxKvRows) rows = kPrefillMaxKvRows;
  p.kv_rows = static_cast<int>(rows - rows % kPrefillResidues);
  return p;
}

// The (token, head) that warp `warp` of block (tile, y) computes; active = false for the warps
// past the last token or past the end of the KV group (they only help stage K/V).
struct PrefillPair {
  int64_t token, head, kv_head;
  bool active;
};

__host__ __device__ inline PrefillPair prefill_pair(const PrefillPlan& p, int64_t tile, int64_t y,
                                                    int warp, int64_t n_tokens, int64_t n_heads,
                                                    int64_t n_kv_heads) {
  const int64_t group = n_heads / n_kv_heads;
  const int64_t in_group = (y % p.head_chunks) * p.heads_per_block + warp % p.heads_per_block;
  PrefillPair r{};
  r.kv_head = y / p.head_chunks;
  r.token = tile * p.tokens_per_block + warp / p.heads_per_block;
  r.head = r.kv_head * group + in_group;
  r.active = warp < p.warps && r.token < n_tokens && in_group < group;
  return r;
}

// Token checks as attention_paged.cu makes them: a sequence row of the block table and a
// position whose block is inside the row. A token that fails gets a NaN head.
__host__ __device__ inline bool attention_token_ok(int32_t row, int32_t pos, int64_t n_seq_rows,
                                                   int64_t block_size, int64_t max_blocks) {
  return row >= 0 && row < n_seq_rows && pos >= 0 && pos / block_size < max_blocks;
}

// The pool slot of position j of a sequence whose block-table row is `blocks`, or -1 when the
// block is negative or the slot outside the pool (the position is then skipped and the error
// flag set, as in attention_paged.cu). j must be a position some checked token sees.
__host__ __device__ inline int64_t attention_slot(const int32_t* blocks, int64_t block_size,
                                                  int64_t n_slots, int64_t j) {
  const int32_t b = blocks[j / block_size];
  const int64_t slot = static_cast<int64_t>(b) * block_size + j % block_size;
  return b < 0 || slot >= n_slots ? -1 : slot;
}

// The distinct sequence rows of a block's tokens, in order of first appearance, each with the
// largest position among its tokens; tokens that failed attention_token_ok are left out. n = 1
// (the usual prefill chunk): the block stages row[0]'s K/V, positions 0 .. max_pos[0];
// n > 1: each warp reads its own sequence from global memory.
struct TileRows {
  int n;
  int32_t row[kPrefillMaxWarps];
  int32_t max_pos[kPrefillMaxWarps];
  int32_t min_pos[kPrefillMaxWarps];  // the smallest position (a window's earliest start)
};

// rows, pos, ok: the block's n_tok <= kPrefillMaxWarps tokens.
__host__ __device__ inline void collect_tile_rows(const int32_t* rows, const int32_t* pos,
                                                  const bool* ok, int n_tok, TileRows& out) {
  out.n = 0;
  for (int t = 0; t < n_tok; ++t) {
    if (!ok[t]) continue;
    int r = 0;
    while (r < out.n && out.row[r] != rows[t]) ++r;
    if (r == out.n) {
      out.row[r] = rows[t];
      out.max_pos[r] = pos[t];
      out.min_pos[r] = pos[t];
      ++out.n;
    } else {
      if (pos[t] > out.max_pos[r]) out.max_pos[r] = pos[t];
      if (pos[t] < out.min_pos[r]) out.min_pos[r] = pos[t];
    }
  }
}

// The tile index at which a query whose window starts at `first` begins in the tile starting
// at j0: max(0, first - j0) (past the tile's end when the window starts after it).
__host__ __device__ inline int tile_first_index(int64_t j0, int64_t first) {
  const int64_t lo = first - j0;
  return lo <= 0 ? 0 : (lo > (int64_t{1} << 30) ? (1 << 30) : static_cast<int>(lo));
}

// How many positions of the tile starting at j0 (kv_rows of them) a query at position pos
// consumes: j0 .. min(pos, j0 + kv_rows - 1), none when pos < j0.
__host__ __device__ inline int tile_positions(int64_t j0, int kv_rows, int32_t pos) {
  const int64_t n = int64_t{pos} + 1 - j0;
  return n <= 0 ? 0 : (n < kv_rows ? static_cast<int>(n) : kv_rows);
}

}  // namespace llmctl::cuda
