// rmsnorm: out = x / sqrt(mean(x^2) + eps) * w per row; one thread block per row.
// As in the CPU reference the sum of squares is kept in double (reduced in a fixed tree, so
// the result does not depend on the batch), the scale is rounded to float once, and
// x * scale * w is two float products that are never contracted into an FMA.

#include "kernels/common.cuh"
#include "kernels/kernels.h"
#include "kernels/rope_math.cuh"

namespace llmctl::cuda {

namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ double warp_reduce_sum_double(double v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    v += __shfl_xor_sync(kFullWarpMask, v, offset);
  return v;
}

static __global__ void rmsnorm_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                      float eps, int64_t n, float* __restrict__ out) {
  __shared__ double partial[kThreads / kWarpSize];
  __shared__ float scale_shared;
  const float* xs = x + static_cast<int64_t>(blockIdx.x) * n;
  float* o = out + static_cast<int64_t>(blockIdx.x) * n;
  double ss = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const double v = static_cast<double>(xs[i]);
    ss += v * v;
  }
  ss = warp_reduce_sum_double(ss);
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  if (lane == 0) partial[warp] = ss;
  __syncthreads();
  if (threadIdx.x == 0) {
    double total = 0.0;
    for (int k = 0; k < kThreads / kWarpSize; ++k) total += partial[k];
    scale_shared =
        static_cast<float>(1.0 / sqrt(total / static_cast<double>(n) + static_cast<double>(eps)));
  }
  __syncthreads();
  const float scale = scale_shared;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) o[i] = mul_rn(mul_rn(xs[i], scale), w[i]);
}

}  // namespace

void launch_rmsnorm_f32(const float* x, const float* w, float eps, int64_t n_tokens, int64_t n,
                        float* out, cudaStream_t stream) {
  if (n_tokens <= 0 || n <= 0) return;
  rmsnorm_kernel<<<static_cast<unsigned>(n_tokens), kThreads, 0, stream>>>(x, w, eps, n, out);
}

}  // namespace llmctl::cuda
