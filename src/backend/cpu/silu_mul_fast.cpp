// silu_mul_fast (silu_mul_fast.h): the sigmoid from exp(-|g|), 8 lanes at a time.
#include "backend/cpu/silu_mul_fast.h"

#include <cstring>

#include "backend/cpu/exp_avx2.h"

namespace llmctl::cpu {

namespace {

__attribute__((target("avx2,fma"))) inline __m256 silu_mul8(__m256 g, __m256 u) {
  const __m256 abs_g = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), g);
  const __m256 t = exp8_avx2(_mm256_sub_ps(_mm256_setzero_ps(), abs_g));  // exp(-|g|)
  const __m256 neg = _mm256_cmp_ps(g, _mm256_setzero_ps(), _CMP_LT_OQ);
  // numerator g (g >= 0, and NaN) or g t (g < 0); -inf * 0 gives NaN, as the reference does
  const __m256 num = _mm256_blendv_ps(g, _mm256_mul_ps(g, t), neg);
  const __m256 s = _mm256_div_ps(num, _mm256_add_ps(_mm256_set1_ps(1.0f), t));
  return _mm256_mul_ps(s, u);
}

}  // namespace

__attribute__((target("avx2,fma"))) void silu_mul_fast(const float* gate, const float* up,
                                                       int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, silu_mul8(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
  if (i < n) {
    const auto bytes = static_cast<size_t>(n - i) * sizeof(float);
    float g[8] = {0, 0, 0, 0, 0, 0, 0, 0}, u[8] = {0, 0, 0, 0, 0, 0, 0, 0}, o[8];
    std::memcpy(g, gate + i, bytes);
    std::memcpy(u, up + i, bytes);
    _mm256_storeu_ps(o, silu_mul8(_mm256_loadu_ps(g), _mm256_loadu_ps(u)));
    std::memcpy(out + i, o, bytes);
  }
}

}  // namespace llmctl::cpu
