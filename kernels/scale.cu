// scale: x[i] = x[i] * factor in place (Gemma's embedding scale). One IEEE f32 multiply
// (mul_rn, no contraction), so the result is bit-identical to the CPU reference.

#include "kernels/common.cuh"
#include "kernels/kernels.h"
#include "kernels/rope_math.cuh"  // mul_rn

namespace llmctl::cuda {

namespace {

constexpr int kThreads = 256;

static __global__ void scale_kernel(float* __restrict__ x, int64_t n, float factor) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    x[i] = mul_rn(x[i], factor);
}

}  // namespace

void launch_scale_f32(float* x, int64_t n, float factor, cudaStream_t stream) {
  if (n <= 0) return;
  scale_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(x, n, factor);
}

}  // namespace llmctl::cuda
