// silu_mul_fast (silu_mul_fast.h): the sigmoid from exp(-|g|), 8 lanes at a time.
#include "backend/cpu/silu_mul_fast.h"

#include "backend/cpu/exp_avx2.h"
#include "backend/cpu/map_avx2.h"

namespace llmctl::cpu {

namespace {
// silu(g) = g sigmoid(g); -inf gives -inf * 0 = NaN, as the reference does
__attribute__((target("avx2,fma"))) inline __m256 silu_mul8(__m256 g, __m256 u) {
  return _mm256_mul_ps(mul_sigmoid8_avx2(g, g), u);
}
}  // namespace

__attribute__((target("avx2,fma"))) void silu_mul_fast(const float* gate, const float* up,
                                                       int64_t n, float* out) {
  map2_avx2<silu_mul8>(gate, up, n, out);
}

}  // namespace llmctl::cpu
