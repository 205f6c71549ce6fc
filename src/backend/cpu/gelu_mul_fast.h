#pragma once
// GeGLU's element-wise product for the fast CPU backend, 8 lanes at a time:
//
//   out[i] = gelu_tanh(gate[i]) * up[i],  gelu_tanh(g) = 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715
//   g^3)))
//
// computed through 0.5 (1 + tanh(y)) = sigmoid(2 y) as g sigmoid(z) * up, z = 2 sqrt(2/pi)
// g (1 + 0.044715 g^2), with the sigmoid of exp_avx2.h (exp only of arguments <= 0). That form
// has no 1 + tanh cancellation, so it is closer to the exact value than the f32 reference
// (CpuBackend::gelu_mul_range, core/activation_math.h) for g < -3; both are tested against
// double. Special values follow the reference: NaN stays NaN, +inf gives inf * up, -inf NaN.
// Only on a CPU with AVX2 and FMA.

#include <cstdint>

namespace llmctl::cpu {

// out[i] for i in [0, n); out may alias gate or up.
void gelu_mul_fast(const float* gate, const float* up, int64_t n, float* out);

}  // namespace llmctl::cpu
