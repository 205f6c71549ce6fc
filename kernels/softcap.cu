// softcap: x[i] = cap * tanh(x[i] / cap) in place (Gemma 2's final-logit soft-cap;
// activation_math.cuh). IEEE division; within a few ulp of the CPU reference (tanhf).

#include "kernels/activation_math.cuh"
#include "kernels/common.cuh"
#include "kernels/kernels.h"

namespace llmctl::cuda {

namespace {

constexpr int kThreads = 256;

static __global__ void softcap_kernel(float* __restrict__ x, int64_t n, float cap) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    x[i] = softcap_f32(x[i], cap);
}

}  // namespace

void launch_softcap_f32(float* x, int64_t n, float cap, cudaStream_t stream) {
  if (n <= 0) return;
  softcap_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(x, n, cap);
}

}  // namespace llmctl::cuda
