#pragma once
// Internal to the matmul fast path: how run_rows (matmul_fast.cpp) blocks a prefill for the
// caches, the sizes in one place. Both orders keep one operand in L2 while the other passes:
//   row blocks (MatmulKernel::row_blocks, the float kernels): a block of weight rows stays while
//     every token tile passes over its row tiles (row_block_rows);
//   token chunks (the others): a chunk of tokens' activations stays while each row tile, read
//     from memory once per chunk (and packed once per chunk, MatmulKernel::pack), serves all of
//     its token tiles (chunk_tokens).
// The sizes follow the core's L2 (cpu_cache_bytes(2)) where sysfs gives it.

#include <cstdint>

#include "backend/cpu/matmul_kernels.h"

namespace llmctl::cpu {

// Rows of one row block of a weight whose rows are w_stride bytes: a whole number of the
// kernel's prefill tiles, at least one.
int64_t row_block_rows(const MatmulKernel& k, int64_t w_stride);

// Tokens of one token chunk of activations token_bytes a token: a whole number of the
// kernel's token tiles, at least one.
int64_t chunk_tokens(const MatmulKernel& k, int64_t token_bytes);

}  // namespace llmctl::cpu
