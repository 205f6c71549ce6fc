// rope: rotary position embedding in place, one thread per (token, head, pair). The math is
// kernels/rope_math.cuh (the same definitions as the CPU reference, angle in double).

#include "kernels/common.cuh"
#include "kernels/kernels.h"
#include "kernels/rope_math.cuh"

namespace llmctl::cuda {

namespace {

constexpr int kThreads = 256;

static __global__ void rope_kernel(float* __restrict__ x, const int32_t* __restrict__ positions,
                                   int64_t n_tokens, int64_t n_heads, int64_t head_dim,
                                   int64_t n_rot, bool neox, double freq_base, double freq_scale,
                                   const float* __restrict__ freq_factors, RopeYarnArgs yarn,
                                   int* error_flag) {
  const int64_t n_pairs = n_rot / 2;
  const int64_t total = n_tokens * n_heads * n_pairs;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += stride) {
    const int64_t pair = e % n_pairs;
    const int64_t head = e / n_pairs;  // token * n_heads + h
    const int32_t pos = positions[head / n_heads];
    if (pos < 0) {  // the CPU throws; here: leave the head as it is and report at the next sync
      atomicCAS(error_flag, 0, kDeviceErrorRopePosition);
      continue;
    }
    int64_t i0 = 0, i1 = 0;
    rope_pair_index_hd(neox, pair, n_rot, &i0, &i1);
    const double factor = freq_factors != nullptr ? static_cast<double>(freq_factors[pair]) : 1.0;
    const double theta = rope_angle_hd(pos, pair, n_rot, freq_base, freq_scale, factor,
                                       yarn.ext_factor, yarn.low, yarn.high);
    float* h = x + head * head_dim;
    rope_rotate_scaled_hd(h + i0, h + i1, theta, yarn.mscale);
  }
}

}  // namespace

void launch_rope_f32(float* x, const int32_t* positions, int64_t n_tokens, int64_t n_heads,
                     int64_t head_dim, int64_t n_rot, bool neox, double freq_base,
                     double freq_scale, const float* freq_factors, RopeYarnArgs yarn,
                     int* error_flag, cudaStream_t stream) {
  const int64_t total = n_tokens * n_heads * (n_rot / 2);
  if (total <= 0) return;
  rope_kernel<<<grid_for(total, kThreads), kThreads, 0, stream>>>(
      x, positions, n_tokens, n_heads, head_dim, n_rot, neox, freq_base, freq_scale, freq_factors,
      yarn, error_flag);
}

}  // namespace llmctl::cuda
