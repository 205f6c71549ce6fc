// add_bias: x (n_tokens, n) += b (n,) per row; one thread per element (grid-stride).

#include "kernels/common.cuh"
#include "kernels/kernels.h"

namespace llmctl::cuda {

namespace {

constexpr int kThreads = 256;

static __global__ void add_bias_kernel(float* __restrict__ x, const float* __restrict__ b,
                                       int64_t n_tokens, int64_t n) {
  const int64_t total = n_tokens * n;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += stride)
    x[i] += b[i % n];
}

}  // namespace

void launch_add_bias_f32(float* x, const float* b, int64_t n_tokens, int64_t n,
                         cudaStream_t stream) {
  if (n_tokens <= 0 || n <= 0) return;
  add_bias_kernel<<<grid_for(n_tokens * n, kThreads), kThreads, 0, stream>>>(x, b, n_tokens, n);
}

}  // namespace llmctl::cuda
