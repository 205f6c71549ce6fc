// gelu_mul: out[i] = gelu_tanh(gate[i]) * up[i]   (GeGLU, Gemma's FFN; activation_math.cuh).
// Within a few ulp of the CPU reference (tanhf differs from glibc's in the last bits; in the
// tail g < -3 that is an absolute error of about |g| 2^-24, as on the CPU).

#include "kernels/activation_math.cuh"
#include "kernels/common.cuh"
#include "kernels/kernels.h"

namespace llmctl::cuda {

namespace {

constexpr int kThreads = 256;

static __global__ void gelu_mul_kernel(const float* __restrict__ gate, const float* __restrict__ up,
                                       int64_t n, float* __restrict__ out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = mul_rn(gelu_tanh_f32(gate[i]), up[i]);
}

}  // namespace

void launch_gelu_mul_f32(const float* gate, const float* up, int64_t n, float* out,
                         cudaStream_t stream) {
  if (n <= 0) return;
  gelu_mul_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(gate, up, n, out);
}

}  // namespace llmctl::cuda
