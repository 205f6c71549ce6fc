#pragma once
// RMSNorm of one row for the fast CPU backend, 8 elements a step:
//
//   out[i] = x[i] * scale * w[i],  scale = 1 / sqrt(sum_i x[i]^2 / n + eps)
//
// The sum of squares is taken in double as the reference's (CpuBackend::rmsnorm_rows), in 8
// double lanes (two 4-lane FMA chains over the row in order, then a fixed pairwise sum, the
// < 8 tail last) instead of one running sum: a row's result depends on its own values only
// (batch invariance), and differs from the reference by the rounding of the double sum, far
// below a float ulp of scale for any real row (tested). The products are the reference's,
// float, in its order. Only on a CPU with AVX2 and FMA.

#include <cstdint>

namespace llmctl::cpu {

// x, out: n floats (out may alias x); w: n floats, any alignment.
void rmsnorm_fast(const float* x, const float* w, int64_t n, float eps, float* out);

}  // namespace llmctl::cpu
