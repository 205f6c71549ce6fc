#pragma once
// gpt-oss's expert activation for the fast CPU backend, 8 lanes at a time:
//
//   x = min(gate, 7);  y = clamp(up, -7, 7);  out = x sigmoid(1.702 x) (y + 1)
//
// (core/activation_math.h swiglu_oai, ggml's swiglu_oai), the sigmoid product from
// mul_sigmoid8_avx2 (exp_avx2.h: exp only of arguments <= 0). Same function as the reference
// (CpuBackend::swiglu_oai_range) up to rounding (a few float ulps, tested); a NaN input gives
// NaN as there (min/clamp keep it). Only on a CPU with AVX2 and FMA.

#include <cstdint>

namespace llmctl::cpu {

// out[i] for i in [0, n); out may alias gate or up.
void swiglu_oai_fast(const float* gate, const float* up, int64_t n, float* out);

}  // namespace llmctl::cpu
