#pragma once
// The soft-cap for the fast CPU backend, 8 lanes at a time:
//
//   x[i] = cap * tanh(x[i] / cap)
//
// with tanh8_avx2 (exp_avx2.h: Cephes' tanhf, an odd polynomial near 0 and (1 - t) / (1 + t)
// from exp above 0.625), within a few float ulps of the reference (core/activation_math.h
// softcap_score, tested). Used for the final logits (Backend::softcap) and for the attention
// scores of the fast attention kernel (AttentionShape::softcap). NaN stays NaN, +-inf gives
// +-cap. Only on a CPU with AVX2 and FMA.

#include <cstdint>

namespace llmctl::cpu {

// x[i] for i in [0, n), in place; cap finite and > 0.
void softcap_fast(float* x, int64_t n, float cap);

}  // namespace llmctl::cpu
