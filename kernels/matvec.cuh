#pragma once
// The matvec kernel template shared by kernels/matvec_<dtype>.cu (one file per weight dtype):
//   out (n_tokens, d) = x (n_tokens, n) @ W^T,   W (d, n) rows in a common.cuh row format.
//
// One warp per output row r. Lane l takes the row's element groups l, l + 32, l + 64, ...,
// dequantizes each in registers and accumulates w * x with fmaf into an f32 accumulator per
// token; a warp-shuffle tree then sums the 32 lanes. The tokens are walked inside the kernel in
// chunks of kTokens that share each dequantized group, and a token's accumulator sees the same
// operations in the same order whatever chunk it falls in: the result for a token is
// bit-identical alone or in a batch of any size (the batch-invariance contract, backend.h).
//
// Correct first: each weight group is read once per chunk of kTokens tokens (decode: once), x
// rows are re-read by every warp through L1/L2. No cuBLAS: a GEMM's split of the reduction
// depends on the problem size, which would break batch invariance.

#include "kernels/common.cuh"

namespace llmctl::cuda {
namespace {

constexpr int kMatvecWarps = 8;  // rows per thread block
constexpr int kTokens = 8;       // tokens sharing one pass over the weight row

template <class Fmt>
__global__ void matvec_kernel(const uint8_t* __restrict__ w, int64_t d, int64_t n,
                              const float* __restrict__ x, int64_t n_tokens,
                              float* __restrict__ out) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kMatvecWarps +
                    static_cast<int64_t>(threadIdx.x) / kWarpSize;
  if (r >= d) return;  // whole warps leave together, so the shuffles stay full-warp
  const uint8_t* row = w + r * Fmt::row_bytes(n);
  const int64_t n_groups = n / Fmt::kGroup;
  for (int64_t t0 = 0; t0 < n_tokens; t0 += kTokens) {
    const int64_t nt = n_tokens - t0 < kTokens ? n_tokens - t0 : kTokens;
    float acc[kTokens];
#pragma unroll
    for (int k = 0; k < kTokens; ++k) acc[k] = 0.0f;
    for (int64_t g = lane; g < n_groups; g += kWarpSize) {
      float v[Fmt::kGroup];
      Fmt::dequantize_group(row, g, v);
      const int64_t col = g * Fmt::kGroup;
#pragma unroll
      for (int k = 0; k < kTokens; ++k) {
        if (k < nt) {
          const float* xs = x + (t0 + k) * n + col;
#pragma unroll
          for (int e = 0; e < Fmt::kGroup; ++e) acc[k] = fmaf(v[e], xs[e], acc[k]);
        }
      }
    }
#pragma unroll
    for (int k = 0; k < kTokens; ++k) {
      const float sum = warp_reduce_sum(acc[k]);  // every lane takes part, even for k >= nt
      if (lane == 0 && k < nt) out[(t0 + k) * d + r] = sum;
    }
  }
}

template <class Fmt>
void launch_matvec(const void* w, int64_t d, int64_t n, const float* x, int64_t n_tokens,
                   float* out, cudaStream_t stream) {
  if (d <= 0 || n <= 0 || n_tokens <= 0) return;
  const auto blocks = static_cast<unsigned>((d + kMatvecWarps - 1) / kMatvecWarps);
  matvec_kernel<Fmt><<<blocks, kMatvecWarps * kWarpSize, 0, stream>>>(
      static_cast<const uint8_t*>(w), d, n, x, n_tokens, out);
}

}  // namespace
}  // namespace llmctl::cuda
