// RMSNorm of one row, AVX2 (rmsnorm_fast.h).
#include "backend/cpu/rmsnorm_fast.h"

#include <immintrin.h>

#include <cmath>

namespace llmctl::cpu {

__attribute__((target("avx2,fma"))) void rmsnorm_fast(const float* x, const float* w, int64_t n,
                                                      float eps, float* out) {
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256d a = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
    const __m256d b = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
    lo = _mm256_fmadd_pd(a, a, lo);
    hi = _mm256_fmadd_pd(b, b, hi);
  }
  alignas(32) double l[4], h[4];
  _mm256_store_pd(l, lo);
  _mm256_store_pd(h, hi);
  double ss = ((l[0] + h[0]) + (l[2] + h[2])) + ((l[1] + h[1]) + (l[3] + h[3]));
  for (; i < n; ++i) ss = std::fma(static_cast<double>(x[i]), static_cast<double>(x[i]), ss);
  const auto scale =
      static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + static_cast<double>(eps)));
  const __m256 s8 = _mm256_set1_ps(scale);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)  // (x * scale) * w, as the reference rounds it: two products
    _mm256_storeu_ps(out + j, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + j), s8),
                                            _mm256_loadu_ps(w + j)));
  for (; j < n; ++j) {
    const float xs = x[j] * scale;
    out[j] = xs * w[j];
  }
}

}  // namespace llmctl::cpu
