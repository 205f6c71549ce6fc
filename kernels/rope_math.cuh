#pragma once
// RoPE per-element math for the device, the same definitions as src/core/rope_math.h (kernels/
// may not include src/). __host__ __device__ so tests/gpu/test_kernel_math.cpp runs exactly this
// code on the CPU and checks it bit for bit against core/rope_math.h.
//
//   theta = pos * freq_scale * base^(-2i / n_rot)          (double, rounded once)
//   (x0, x1) <- (x0 cos theta - x1 sin theta, x0 sin theta + x1 cos theta)   (float)
//
// Exactness: the float products and sums use the _rn intrinsics on the device, which nvcc never
// contracts into an FMA, so the rotation rounds exactly as the host code does (the host build
// is ISO C++17, where GCC does not contract either).

#include <cuda_runtime.h>
#include <math.h>

#include <cstdint>

namespace llmctl::cuda {

__host__ __device__ __forceinline__ float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
__host__ __device__ __forceinline__ float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
__host__ __device__ __forceinline__ float sub_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

// Angle of pair `pair` at position `pos` (core/rope_math.h rope_theta).
__host__ __device__ __forceinline__ double rope_theta_hd(int64_t pos, int64_t pair, int64_t n_rot,
                                                         double freq_base, double freq_scale) {
  const double exponent = -2.0 * static_cast<double>(pair) / static_cast<double>(n_rot);
  return static_cast<double>(pos) * freq_scale * ::pow(freq_base, exponent);
}

// YaRN's mix of interpolated and extrapolated angle (core/rope_math.h rope_yarn_theta).
__host__ __device__ __forceinline__ double rope_yarn_theta_hd(double theta_extrap, int64_t pair,
                                                              double freq_scale, double ext_factor,
                                                              double low, double high) {
  const double span = high - low > 0.001 ? high - low : 0.001;
  double y = (static_cast<double>(pair) - low) / span;
  y = y < 0.0 ? 0.0 : (y > 1.0 ? 1.0 : y);
  const double mix = (1.0 - y) * ext_factor;
  return freq_scale * theta_extrap * (1.0 - mix) + theta_extrap * mix;
}

// The angle of a pair with its frequency factor and YaRN (core/rope_math.h rope_angle).
__host__ __device__ __forceinline__ double rope_angle_hd(int64_t pos, int64_t pair, int64_t n_rot,
                                                         double freq_base, double freq_scale,
                                                         double factor, double ext_factor,
                                                         double low, double high) {
  if (ext_factor == 0.0) return rope_theta_hd(pos, pair, n_rot, freq_base, freq_scale) / factor;
  const double extrap = rope_theta_hd(pos, pair, n_rot, freq_base, 1.0) / factor;
  return rope_yarn_theta_hd(extrap, pair, freq_scale, ext_factor, low, high);
}

// Indices within a head of the two elements of pair `pair`: Normal pairs (2i, 2i + 1), Neox
// pairs (i, i + n_rot / 2).
__host__ __device__ __forceinline__ void rope_pair_index_hd(bool neox, int64_t pair, int64_t n_rot,
                                                            int64_t* i0, int64_t* i1) {
  if (!neox) {
    *i0 = 2 * pair;
    *i1 = 2 * pair + 1;
  } else {
    *i0 = pair;
    *i1 = pair + n_rot / 2;
  }
}

// Rotates one pair in place by theta with cos and sin times mscale (1: core/rope_math.h
// rope_rotate exactly; the CPU backends scale the same way in double before rounding).
__host__ __device__ __forceinline__ void rope_rotate_scaled_hd(float* x0, float* x1, double theta,
                                                               double mscale) {
  const float c = static_cast<float>(::cos(theta) * mscale);
  const float s = static_cast<float>(::sin(theta) * mscale);
  const float a = *x0;
  const float b = *x1;
  *x0 = sub_rn(mul_rn(a, c), mul_rn(b, s));
  *x1 = add_rn(mul_rn(a, s), mul_rn(b, c));
}

__host__ __device__ __forceinline__ void rope_rotate_hd(float* x0, float* x1, double theta) {
  rope_rotate_scaled_hd(x0, x1, theta, 1.0);
}

// Attention temperature's factor (core/rope_math.h attn_temperature), the same double math.
__host__ __device__ __forceinline__ float attn_temperature_hd(int64_t pos, double beta,
                                                              int64_t length) {
  if (pos < length) return 1.0f;
  return static_cast<float>(1.0 + beta * ::log(1.0 + static_cast<double>(pos / length)));
}

}  // namespace llmctl::cuda
