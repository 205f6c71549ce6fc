// find_nan_inf: per row, the lowest column holding NaN and the lowest holding +inf
// (kernels.h contract). One thread block per row; each thread strides the row, so the first
// hit it meets is its lowest; a warp-shuffle and a shared-memory min then give the row's.
#include <climits>

#include "kernels/common.cuh"
#include "kernels/kernels.h"

namespace llmctl::cuda {

namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ int warp_reduce_min(int v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    v = min(v, __shfl_xor_sync(kFullWarpMask, v, offset));
  return v;
}

static __global__ void find_nan_inf_kernel(const float* __restrict__ logits, int64_t n_cols,
                                           int32_t* __restrict__ out) {
  __shared__ int s_nan[kThreads / kWarpSize], s_inf[kThreads / kWarpSize];
  const int64_t r = blockIdx.x;
  const float* row = logits + r * n_cols;
  int nan = INT_MAX, inf = INT_MAX;
  for (int64_t i = threadIdx.x; i < n_cols; i += blockDim.x) {
    const float v = row[i];
    // v != v: NaN, also under fast-math flags that may fold isnan().
    if (nan == INT_MAX && v != v) nan = static_cast<int>(i);
    if (inf == INT_MAX && v == __int_as_float(0x7f800000)) inf = static_cast<int>(i);
  }
  nan = warp_reduce_min(nan);
  inf = warp_reduce_min(inf);
  if (threadIdx.x % kWarpSize == 0) {
    s_nan[threadIdx.x / kWarpSize] = nan;
    s_inf[threadIdx.x / kWarpSize] = inf;
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  for (int w = 1; w < kThreads / kWarpSize; ++w) {
    nan = min(nan, s_nan[w]);
    inf = min(inf, s_inf[w]);
  }
  out[2 * r] = nan == INT_MAX ? -1 : nan;
  out[2 * r + 1] = inf == INT_MAX ? -1 : inf;
}

}  // namespace

void launch_find_nan_inf_f32(const float* logits, int64_t n_rows, int64_t n_cols, int32_t* out,
                             cudaStream_t stream) {
  if (n_rows <= 0 || n_cols <= 0) return;
  find_nan_inf_kernel<<<static_cast<unsigned>(n_rows), kThreads, 0, stream>>>(logits, n_cols, out);
}

}  // namespace llmctl::cuda
