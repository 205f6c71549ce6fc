#pragma once
// exp of 8 floats at once with AVX2 + FMA, for the fast CPU backend's softmax (softmax_fast.h)
// and SiLU (silu_mul_fast.h): Cephes' expf (x = n ln2 + r, |r| <= ln2 / 2, a degree-7
// polynomial in r, times 2^n), within a few float ulps of exp for x in [-87, 0] (tested
// against double exp in test_softmax_fast). Only for x <= 0 (every caller's arguments): NaN
// stays NaN, x < -87 (and -inf) gives 0, where exp is below 2^-125. Callers check for AVX2
// and FMA at run time (attention_fast_available()).

#include <immintrin.h>

namespace llmctl::cpu {

// exp(x) for x <= 0 (larger x is not needed and not handled): NaN
// stays NaN, x < -87 (and -inf) gives 0.
__attribute__((target("avx2,fma"))) inline __m256 exp8_avx2(__m256 x) {
  const __m256 tiny = _mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_LT_OQ);  // false for NaN
  // max(lo, x) returns x when x is NaN: NaN reaches the end
  x = _mm256_max_ps(_mm256_set1_ps(-87.0f), x);
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // r = x - n ln2, ln2 split in two so that n * hi is exact
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r);
  p = _mm256_add_ps(p, _mm256_set1_ps(1.0f));
  // 2^n for n in [-126, 0]: the biased exponent n + 127 in the float's exponent field
  const __m256i e =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  const __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
  return _mm256_andnot_ps(tiny, y);
}

}  // namespace llmctl::cpu
