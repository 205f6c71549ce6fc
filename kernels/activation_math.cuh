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

// gpt-oss's expert activation (core/activation_math.h swiglu_oai, ggml's swiglu_oai):
//   x = min(gate, 7);  y = clamp(up, -7, 7);  x / (1 + exp(-1.702 x)) * (y + 1)
// with the NaN of an input kept (fminf would drop it), in ggml's order of operations.
__host__ __device__ __forceinline__ float swiglu_oai_f32(float gate, float up) {
  const float kAlpha = 1.702f, kLimit = 7.0f;
  const float x = gate > kLimit ? kLimit : gate;
  const float y = up > kLimit ? kLimit : (up < -kLimit ? -kLimit : up);
  const float glu = div_rn(x, add_rn(1.0f, expf(mul_rn(kAlpha, -x))));
  return mul_rn(glu, add_rn(y, 1.0f));
}

// cap > 0 (callers skip the call for cap = 0, "no cap").
__host__ __device__ __forceinline__ float softcap_f32(float x, float cap) {
  return mul_rn(cap, tanhf(div_rn(x, cap)));
}

}  // namespace llmctl::cuda
