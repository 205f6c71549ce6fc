#pragma once
// The per-element math of gelu_mul.cu, softcap.cu and the attention kernels' soft-cap, as
// __host__ __device__ inline functions (the definitions of src/core/activation_math.h; kernels/
// may not include src/):
//   gelu_tanh(x)        = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))   (llama.cpp's order)
//   softcap_score(x, c) = c tanh(x / c)
// The products and sums use the _rn intrinsics (rope_math.cuh), which nvcc never contracts into
// an FMA, so only tanhf (CUDA's, max 2 ulp) differs from the CPU reference's evaluation.

#include <cuda_runtime.h>
#include <math.h>

#include "kernels/rope_math.cuh"

namespace llmctl::cuda {

__host__ __device__ __forceinline__ float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

__host__ __device__ __forceinline__ float gelu_tanh_f32(float x) {
  const float kGeluCoefA = 0.044715f;
  const float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  const float inner =
      mul_rn(mul_rn(kSqrt2OverPi, x), add_rn(1.0f, mul_rn(mul_rn(kGeluCoefA, x), x)));
  return mul_rn(mul_rn(0.5f, x), add_rn(1.0f, tanhf(inner)));
}

// cap > 0 (callers skip the call for cap = 0, "no cap").
__host__ __device__ __forceinline__ float softcap_f32(float x, float cap) {
  return mul_rn(cap, tanhf(div_rn(x, cap)));
}

}  // namespace llmctl::cuda
