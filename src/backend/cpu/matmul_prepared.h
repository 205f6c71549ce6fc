#pragma once
// Internal to the matmul fast path (matmul_fast.cpp): one weight's product made ready to run,
// its kernel chosen and its activations converted to what the kernel reads, and the walk of its
// rows. matmul_fast runs one; matmul_fast_shared runs several over one input, converting the
// activations once per distinct format (matmul_activations.cpp).

#include <cstdint>

#include "backend/cpu/matmul_fast.h"
#include "backend/cpu/matmul_kernels.h"

namespace llmctl::cpu {

struct PreparedMatmul {
  MatmulKernel k;                 // as run: after prepare_activations, the tile it calls
  TileArgs base;                  // the weight's first row, token 0, the activations' arrays
  const uint8_t* fits = nullptr;  // per-token f16 flags when some token does not fit, else null
  int64_t n_rows = 0;
  int64_t task_rows = 0;  // rows per thread task (a multiple of every tile height)
  int64_t n_tasks = 0;
};

// Whether kernels a and b read the same activation arrays with the same contents (one
// conversion of x serves both).
bool same_activations(const MatmulKernel& a, const MatmulKernel& b);

// Converts x (n_tokens, p.base.n) into scratch as p.k reads it (int8 blocks and their sums,
// f16 halves, f16-rounded f32) over the pool, and points p.base (and p.fits) at it. A kernel
// with f32 activations reads x as it is.
void prepare_activations(PreparedMatmul& p, bool avx2, const float* x, int64_t n_tokens,
                         ThreadPool& pool, MatmulScratch& scratch);

// Points p at the activations `like` prepared (same_activations(p.k, like.k) holds).
void share_activations(PreparedMatmul& p, const PreparedMatmul& like);

// Rows [r0, r1) of p's output for each of its n_tokens tokens, tile by tile.
void run_rows(const PreparedMatmul& p, int64_t n_tokens, int64_t r0, int64_t r1);

}  // namespace llmctl::cpu
