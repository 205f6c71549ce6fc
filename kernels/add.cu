// add: x[i] += y[i] (the residual); one thread per element (grid-stride).

#include "kernels/common.cuh"
#include "kernels/kernels.h"

namespace llmctl::cuda {

namespace {

constexpr int kThreads = 256;

static __global__ void add_kernel(float* __restrict__ x, const float* __restrict__ y, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    x[i] += y[i];
}

}  // namespace

void launch_add_f32(float* x, const float* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  add_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(x, y, n);
}

}  // namespace llmctl::cuda
