#pragma once
// Per-element math of the GeGLU activation and of the soft-cap, shared by the CPU reference
// backend's ops and its attention (plain inline C++, like rope_math.h and softmax.h). The
// fast CPU paths and the CUDA kernels compute the same functions their own way and are
// tested against these.
//
//   gelu_tanh(x)       = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
//   softcap_score(x,c) = c tanh(x / c)
//
// gelu_tanh is written as llama.cpp's ggml_gelu_f32 writes it (same constants, same order of
// float operations), so it rounds as llama.cpp's f32 path does up to the tanhf of the libm.
// In f32, 1 + tanh(y) loses the low bits of tanh near y = -inf: the result is within a few
// float ulps of |x| * 2^-23 of the exact value (absolute, not relative, for x < -3 or so).

#include <algorithm>
#include <cmath>

namespace llmctl {

inline constexpr float kGeluCoefA = 0.044715f;
inline constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;

inline float gelu_tanh(float x) {
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kGeluCoefA * x * x)));
}

// gpt-oss's gated activation, ggml's swiglu_oai (ggml-cpu ops.cpp) with llama.cpp's constants
// (build_moe_ffn LLM_FFN_SWIGLU_OAI_MOE: alpha 1.702, limit 7):
//   x = min(gate, limit);  y = clamp(up, -limit, limit);  out = x / (1 + exp(-alpha x)) * (y + 1)
// in the same order of float operations as ggml's CPU loop.
inline constexpr float kSwigluOaiAlpha = 1.702f;
inline constexpr float kSwigluOaiLimit = 7.0f;
inline float swiglu_oai(float gate, float up) {
  // std::min / std::clamp as ggml: a NaN input stays NaN (fmin would drop it)
  const float x = std::min(gate, kSwigluOaiLimit);
  const float y = std::clamp(up, -kSwigluOaiLimit, kSwigluOaiLimit);
  const float glu = x / (1.0f + std::exp(kSwigluOaiAlpha * (-x)));
  return glu * (y + 1.0f);
}

// cap finite and > 0. Odd, bounded by cap, the identity near 0 (slope 1).
inline float softcap_score(float x, float cap) { return cap * std::tanh(x / cap); }

}  // namespace llmctl
