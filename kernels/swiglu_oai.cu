// swiglu_oai: out[i] = swiglu_oai(gate[i], up[i])   (gpt-oss's experts; activation_math.cuh).
// Within a few ulp of the CPU reference (CUDA's expf differs from glibc's in the last bits).

#include "kernels/activation_math.cuh"
#include "kernels/common.cuh"
#include "kernels/kernels.h"

namespace llmctl::cuda {

namespace {

constexpr int kThreads = 256;

static __global__ void swiglu_oai_kernel(const float* __restrict__ gate,
                                         const float* __restrict__ up, int64_t n,
                                         float* __restrict__ out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = swiglu_oai_f32(gate[i], up[i]);
}

}  // namespace

void launch_swiglu_oai_f32(const float* gate, const float* up, int64_t n, float* out,
                           cudaStream_t stream) {
  if (n <= 0) return;
  swiglu_oai_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(gate, up, n, out);
}

}  // namespace llmctl::cuda
