// The cache blocking of matmul_fast's prefill (matmul_blocking.h).
#include "backend/cpu/matmul_blocking.h"

#include <algorithm>

#include "core/cpu_features.h"

namespace llmctl::cpu {

namespace {

// The core's L2 in bytes, 0 when sysfs does not say.
int64_t l2_bytes() {
  static const int64_t bytes = cpu_cache_bytes(2);
  return bytes;
}

// Weight bytes of one row block: a fifth of L2, at least 96 KiB (the size on the 512 KiB-L2
// EPYC this began on). Each token tile reads its activations from L2 once per row tile of the
// block, so a small block re-read them often (F16 2048x8192: 6 rows in 96 KiB). The Xeon, 2 MiB
// L2 (409 KiB), 512 tokens, alternated in one process: F16, F32 and BF16 at 2048x2048 ..
// 2048x8192 1.04x to 1.32x on one and two threads (BENCHMARKS.md, 2026-12-07 evening).
constexpr int64_t kMinRowBlockBytes = 96 * 1024;

// Activation bytes of one token chunk: most of a 512 KiB L2, so that each row tile, read from
// memory once per chunk, serves as many tokens as possible while the chunk's activations stay
// in L2 (F16 2048x8192 at 512 tokens: 54 GFLOP/s with 192 KiB, 72 with 384 KiB; one core,
// tools/bench_matmul).
constexpr int64_t kChunkBytes = 384 * 1024;

// Tokens a chunk has at least when the kernel packs its row tiles (MatmulKernel::pack), which
// it does once per chunk: a wide weight (Q4_K 2048x8192: 32 tokens by kChunkBytes) repacked
// every 4 token tiles spent more on packing than the L2-resident chunk saved. Past L2 the
// activations stream from L3, which keeps up. 2048x8192 at 512 tokens, one core of the AVX-512
// EPYC: Q4_K 264 -> 304 GFLOP/s, Q6_K 206 -> 240 (two threads 480 -> 596, 425 -> 484); held
// to AVX2 +4 to 10 %; the 8192x2048 shapes (152 tokens by kChunkBytes) unchanged.
// With MatmulKernel::pack_fills_l2, as many as fill half of L2: fewer packs of each row tile.
// Two threads of the Xeon (2 MiB L2: 408 tokens, not 152, for 2048-wide weights), 512 tokens:
// Q2_K .. Q6_K, IQ4_XS, Q5_0, IQ4_NL 1.02x to 1.12x (BENCHMARKS.md, 2026-12-07 evening).
constexpr int64_t kPackedChunkTokens = 128;

}  // namespace

int64_t row_block_rows(const MatmulKernel& k, int64_t w_stride) {
  const int64_t bytes = std::max(kMinRowBlockBytes, l2_bytes() / 5);
  return std::max<int64_t>(1, bytes / w_stride / k.rows_prefill) * k.rows_prefill;
}

int64_t chunk_tokens(const MatmulKernel& k, int64_t token_bytes) {
  int64_t tokens = kChunkBytes / token_bytes;
  if (k.pack != nullptr) {
    tokens = std::max(tokens, kPackedChunkTokens);
    if (k.pack_fills_l2) tokens = std::max(tokens, l2_bytes() / 2 / token_bytes);
  }
  return std::max<int64_t>(1, tokens / k.tokens_prefill) * k.tokens_prefill;
}

}  // namespace llmctl::cpu
