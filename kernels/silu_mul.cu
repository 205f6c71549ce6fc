// silu_mul: out[i] = silu(gate[i]) * up[i], silu(g) = g / (1 + exp(-g))   (SwiGLU).
// IEEE division (nvcc's default -prec-div=true) and the full-precision expf: the result is
// within a few ulp of the CPU's (expf differs from glibc's exp in the last bit at most).

#include "kernels/common.cuh"
#include "kernels/kernels.h"
#include "kernels/rope_math.cuh"

namespace llmctl::cuda {

namespace {

constexpr int kThreads = 256;

static __global__ void silu_mul_kernel(const float* __restrict__ gate, const float* __restrict__ up,
                                       int64_t n, float* __restrict__ out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const float g = gate[i];
    out[i] = mul_rn(g / add_rn(1.0f, expf(-g)), up[i]);
  }
}

}  // namespace

void launch_silu_mul_f32(const float* gate, const float* up, int64_t n, float* out,
                         cudaStream_t stream) {
  if (n <= 0) return;
  silu_mul_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(gate, up, n, out);
}

}  // namespace llmctl::cuda
