// moe_combine: out (n_tokens, n_cols) row t = sum_{r < k} weights[t, r] * y_slots[t * k + r]
// (backend.h "mixture of experts"). Each product is rounded on its own (mul_rn) and added in
// rank order from the r = 0 product (add_rn): no fused multiply-add, so the result has the
// CPU reference's bits. One thread per output element, grid-stride.

#include "kernels/common.cuh"
#include "kernels/kernels.h"
#include "kernels/rope_math.cuh"  // mul_rn, add_rn

namespace llmctl::cuda {

namespace {

constexpr int kThreads = 256;

static __global__ void moe_combine_kernel(const float* __restrict__ y_slots,
                                          const float* __restrict__ weights, int64_t n_tokens,
                                          int64_t k, int64_t n_cols, float* __restrict__ out) {
  const int64_t total = n_tokens * n_cols;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += stride) {
    const int64_t t = i / n_cols, c = i % n_cols;
    const float* w = weights + t * k;
    const float* y = y_slots + t * k * n_cols + c;
    float acc = mul_rn(w[0], y[0]);
    for (int64_t r = 1; r < k; ++r) acc = add_rn(acc, mul_rn(w[r], y[r * n_cols]));
    out[i] = acc;
  }
}

}  // namespace

void launch_moe_combine_f32(const float* y_slots, const float* weights, int64_t n_tokens,
                            int64_t k, int64_t n_cols, float* out, cudaStream_t stream) {
  if (n_tokens <= 0 || n_cols <= 0 || k <= 0) return;
  moe_combine_kernel<<<grid_for(n_tokens * n_cols, kThreads), kThreads, 0, stream>>>(
      y_slots, weights, n_tokens, k, n_cols, out);
}

}  // namespace llmctl::cuda
