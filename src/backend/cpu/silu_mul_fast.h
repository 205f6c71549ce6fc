#pragma once
// SwiGLU's element-wise product for the fast CPU backend, 8 lanes at a time:
//
//   out[i] = silu(gate[i]) * up[i],  silu(g) = g / (1 + exp(-g))
//
// computed as g / (1 + t) for g >= 0 and g t / (1 + t) for g < 0, with t = exp(-|g|) from
// exp_avx2.h, so exp only ever sees arguments <= 0 and never overflows. Same function as the
// reference (CpuBackend::silu_mul_range) up to rounding (a few float ulps, tested); the special
// values follow it: NaN stays NaN, +inf gives inf * up, -inf gives NaN, as g / (1 + exp(-g))
// does. Only on a CPU with AVX2 and FMA.

#include <cstdint>

namespace llmctl::cpu {

// out[i] for i in [0, n); out may alias gate or up.
void silu_mul_fast(const float* gate, const float* up, int64_t n, float* out);

}  // namespace llmctl::cpu
