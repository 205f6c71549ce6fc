#pragma once
// exp of 8 floats at once with AVX2 + FMA, for the fast CPU backend's softmax (softmax_fast.h),
// and the sigmoid and tanh built on it for SiLU, GELU and the soft-cap (silu_mul_fast.h,
// gelu_mul_fast.h, softcap_fast.h): Cephes' expf (x = n ln2 + r, |r| <= ln2 / 2, a degree-7
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

// x * sigmoid(z) = x / (1 + exp(-z)), computed as x / (1 + t) for z >= 0 and x t / (1 + t) for
// z < 0 with t = exp(-|z|), so exp never overflows and the small tail keeps its relative
// precision. NaN z gives NaN; z = -inf gives x * 0 (NaN for infinite x), z = +inf gives x.
__attribute__((target("avx2,fma"))) inline __m256 mul_sigmoid8_avx2(__m256 x, __m256 z) {
  const __m256 abs_z = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), z);
  const __m256 t = exp8_avx2(_mm256_sub_ps(_mm256_setzero_ps(), abs_z));  // exp(-|z|)
  const __m256 neg = _mm256_cmp_ps(z, _mm256_setzero_ps(), _CMP_LT_OQ);
  const __m256 num = _mm256_blendv_ps(x, _mm256_mul_ps(x, t), neg);
  return _mm256_div_ps(num, _mm256_add_ps(_mm256_set1_ps(1.0f), t));
}

// tanh(y) within a few float ulps (Cephes' tanhf): for |y| <= 0.625 the odd polynomial
// |y| + |y|^3 P(y^2) (no cancellation near 0), above it (1 - t) / (1 + t) with t = exp(-2|y|)
// <= 0.29, then the sign of y put back. NaN stays NaN, +-inf gives +-1.
__attribute__((target("avx2,fma"))) inline __m256 tanh8_avx2(__m256 y) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 abs_y = _mm256_andnot_ps(sign, y);
  const __m256 y2 = _mm256_mul_ps(y, y);
  __m256 p = _mm256_set1_ps(-5.70498872745e-3f);
  p = _mm256_fmadd_ps(p, y2, _mm256_set1_ps(2.06390887954e-2f));
  p = _mm256_fmadd_ps(p, y2, _mm256_set1_ps(-5.37397155531e-2f));
  p = _mm256_fmadd_ps(p, y2, _mm256_set1_ps(1.33314422036e-1f));
  p = _mm256_fmadd_ps(p, y2, _mm256_set1_ps(-3.33332819422e-1f));
  const __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(p, y2), abs_y, abs_y);
  const __m256 t = exp8_avx2(_mm256_mul_ps(abs_y, _mm256_set1_ps(-2.0f)));
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 large = _mm256_div_ps(_mm256_sub_ps(one, t), _mm256_add_ps(one, t));
  // false for NaN: the polynomial carries it
  const __m256 is_large = _mm256_cmp_ps(abs_y, _mm256_set1_ps(0.625f), _CMP_GT_OQ);
  // tanh(|y|) with the sign of y (so tanh(-0) = -0)
  return _mm256_or_ps(_mm256_blendv_ps(small, large, is_large), _mm256_and_ps(sign, y));
}

}  // namespace llmctl::cpu
