// softmax_fast (softmax_fast.h): Cephes-style expf in AVX2 lanes.
#include "backend/cpu/softmax_fast.h"

#include <immintrin.h>

#include <cstring>

namespace llmctl::cpu {

namespace {

#define LLMCTL_SOFTMAX_AVX2 __attribute__((target("avx2,fma")))

// exp(x) for x <= 0 (the softmax's arguments; larger x is not needed and not handled): NaN
// stays NaN, x < -87 (and -inf) gives 0.
LLMCTL_SOFTMAX_AVX2 inline __m256 exp8(__m256 x) {
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

// Up to 7 trailing values through the same lanes (the rest padded with 0, whose exp is unused).
LLMCTL_SOFTMAX_AVX2 inline __m256 load_tail(const float* x, int64_t m) {
  float buf[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::memcpy(buf, x, static_cast<size_t>(m) * sizeof(float));
  return _mm256_loadu_ps(buf);
}

LLMCTL_SOFTMAX_AVX2 inline void store_tail(float* x, __m256 v, int64_t m) {
  float buf[8];
  _mm256_storeu_ps(buf, v);
  std::memcpy(x, buf, static_cast<size_t>(m) * sizeof(float));
}

// Adds the 8 lanes of v to the two double accumulators (4 lanes each).
LLMCTL_SOFTMAX_AVX2 inline void add_to_sum(__m256 v, __m256d& lo, __m256d& hi) {
  lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
  hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}

}  // namespace

LLMCTL_SOFTMAX_AVX2 void exp_fast(const float* x, int64_t n, float* y) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, exp8(_mm256_loadu_ps(x + i)));
  if (i < n) store_tail(y + i, exp8(load_tail(x + i, n - i)), n - i);
}

LLMCTL_SOFTMAX_AVX2 void softmax_fast(float* x, int64_t n) {
  // The max exactly as softmax_inplace takes it (a NaN x[0] stays, later NaNs never win).
  float max_v = x[0];
  for (int64_t i = 1; i < n; ++i)
    if (x[i] > max_v) max_v = x[i];
  const __m256 m = _mm256_set1_ps(max_v);
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), m));
    _mm256_storeu_ps(x + i, e);
    add_to_sum(e, lo, hi);
  }
  if (i < n) {
    const int64_t r = n - i;
    __m256 e = exp8(_mm256_sub_ps(load_tail(x + i, r), m));
    store_tail(x + i, e, r);
    // the padding lanes must not count: zero them before summing
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    e = _mm256_and_ps(
        e, _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(r)), lane)));
    add_to_sum(e, lo, hi);
  }
  double s[4];
  _mm256_storeu_pd(s, _mm256_add_pd(lo, hi));
  const auto inv = static_cast<float>(1.0 / ((s[0] + s[2]) + (s[1] + s[3])));
  const __m256 vinv = _mm256_set1_ps(inv);
  i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vinv));
  for (; i < n; ++i) x[i] *= inv;
}

}  // namespace llmctl::cpu
