// attn_temperature: x (n_tokens, n_cols) row t *= 1 + beta ln(1 + floor(pos[t] / length)) in
// place (Mistral 3's scaling of q after RoPE). The factor is rope_math.cuh's
// attn_temperature_hd, the double math of core/rope_math.h rounded to float once; the product
// one IEEE f32 multiply (mul_rn, no contraction), so rows equal the CPU reference's bits.

#include "kernels/common.cuh"
#include "kernels/kernels.h"
#include "kernels/rope_math.cuh"  // attn_temperature_hd, mul_rn

namespace llmctl::cuda {

namespace {

constexpr int kThreads = 256;

// One block per token: thread 0's factor through shared memory, then the row.
static __global__ void attn_temperature_kernel(float* __restrict__ x,
                                               const int32_t* __restrict__ positions,
                                               int64_t n_cols, double beta, int64_t length) {
  __shared__ float factor;
  const int64_t t = blockIdx.x;
  if (threadIdx.x == 0) factor = attn_temperature_hd(positions[t], beta, length);
  __syncthreads();
  float* row = x + t * n_cols;
  for (int64_t i = threadIdx.x; i < n_cols; i += blockDim.x) row[i] = mul_rn(row[i], factor);
}

}  // namespace

void launch_attn_temperature_f32(float* x, const int32_t* positions, int64_t n_tokens,
                                 int64_t n_cols, double beta, int64_t length, cudaStream_t stream) {
  if (n_tokens <= 0 || n_cols <= 0) return;
  attn_temperature_kernel<<<static_cast<unsigned>(n_tokens), kThreads, 0, stream>>>(
      x, positions, n_cols, beta, length);
}

}  // namespace llmctl::cuda
