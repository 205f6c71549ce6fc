// swiglu_oai_fast (swiglu_oai_fast.h).
#include "backend/cpu/swiglu_oai_fast.h"

#include "backend/cpu/exp_avx2.h"
#include "backend/cpu/map_avx2.h"
#include "core/activation_math.h"

namespace llmctl::cpu {

namespace {
// min and clamp with the NaN of the input kept: _mm256_min_ps(a, b) returns b when either is
// NaN, so the input goes second.
__attribute__((target("avx2,fma"))) inline __m256 swiglu_oai8(__m256 g, __m256 u) {
  const __m256 lim = _mm256_set1_ps(kSwigluOaiLimit);
  const __m256 x = _mm256_min_ps(lim, g);
  const __m256 y = _mm256_max_ps(_mm256_set1_ps(-kSwigluOaiLimit), _mm256_min_ps(lim, u));
  const __m256 glu = mul_sigmoid8_avx2(x, _mm256_mul_ps(_mm256_set1_ps(kSwigluOaiAlpha), x));
  return _mm256_mul_ps(glu, _mm256_add_ps(y, _mm256_set1_ps(1.0f)));
}
}  // namespace

__attribute__((target("avx2,fma"))) void swiglu_oai_fast(const float* gate, const float* up,
                                                         int64_t n, float* out) {
  map2_avx2<swiglu_oai8>(gate, up, n, out);
}

}  // namespace llmctl::cpu
