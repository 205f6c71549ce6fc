// convert_f16: f32 activations to f16 for the cuBLAS prefill GEMM (src/backend/cuda/gemm.cpp).
//   out[i] = round_to_nearest_even(x[i]), i < n   (|x| > 65504 becomes +-inf, as in f16)

#include "kernels/common.cuh"
#include "kernels/kernels.h"

namespace llmctl::cuda {

namespace {

constexpr int kThreads = 256;

static __global__ void convert_f16_kernel(const float* __restrict__ x, int64_t n,
                                          uint16_t* __restrict__ out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = __half_as_ushort(__float2half_rn(x[i]));
}

}  // namespace

void launch_convert_f32_f16(const float* x, int64_t n, uint16_t* out, cudaStream_t stream) {
  if (n <= 0) return;
  convert_f16_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(x, n, out);
}

}  // namespace llmctl::cuda
