// gelu_mul_fast (gelu_mul_fast.h): g sigmoid(z) with z the tanh argument doubled, 8 lanes.
#include "backend/cpu/gelu_mul_fast.h"

#include "backend/cpu/exp_avx2.h"
#include "backend/cpu/map_avx2.h"
#include "core/activation_math.h"

namespace llmctl::cpu {

namespace {
// z = g (2 sqrt(2/pi) + 2 sqrt(2/pi) 0.044715 g^2)
__attribute__((target("avx2,fma"))) inline __m256 gelu_mul8(__m256 g, __m256 u) {
  constexpr float kA = 2.0f * kSqrt2OverPi, kB = 2.0f * kSqrt2OverPi * kGeluCoefA;
  const __m256 z = _mm256_mul_ps(
      g, _mm256_fmadd_ps(_mm256_mul_ps(g, g), _mm256_set1_ps(kB), _mm256_set1_ps(kA)));
  return _mm256_mul_ps(mul_sigmoid8_avx2(g, z), u);
}
}  // namespace

__attribute__((target("avx2,fma"))) void gelu_mul_fast(const float* gate, const float* up,
                                                       int64_t n, float* out) {
  map2_avx2<gelu_mul8>(gate, up, n, out);
}

}  // namespace llmctl::cpu
