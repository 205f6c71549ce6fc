// sigmoid_scale_rows: x (n_tokens, n_cols) row t *= sigmoid(gate[t]) in place, sigmoid(g) =
// 1 / (1 + exp(-g)) (Qwen2-MoE's gated shared expert; backend.h "mixture of experts"). IEEE
// division and add, the full-precision expf, one IEEE multiply per element: within an ulp or
// two of the CPU (expf and glibc's exp may differ in the last bit). One thread per element,
// grid-stride; the scale is recomputed per element (the same bits each time).

#include "kernels/common.cuh"
#include "kernels/kernels.h"
#include "kernels/rope_math.cuh"  // mul_rn, add_rn

namespace llmctl::cuda {

namespace {

constexpr int kThreads = 256;

static __global__ void sigmoid_scale_rows_kernel(float* __restrict__ x,
                                                 const float* __restrict__ gate, int64_t n_tokens,
                                                 int64_t n_cols) {
  const int64_t total = n_tokens * n_cols;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += stride) {
    const float s = __fdiv_rn(1.0f, add_rn(1.0f, expf(-gate[i / n_cols])));
    x[i] = mul_rn(x[i], s);
  }
}

}  // namespace

void launch_sigmoid_scale_rows_f32(float* x, const float* gate, int64_t n_tokens, int64_t n_cols,
                                   cudaStream_t stream) {
  if (n_tokens <= 0 || n_cols <= 0) return;
  sigmoid_scale_rows_kernel<<<grid_for(n_tokens * n_cols, kThreads), kThreads, 0, stream>>>(
      x, gate, n_tokens, n_cols);
}

}  // namespace llmctl::cuda
