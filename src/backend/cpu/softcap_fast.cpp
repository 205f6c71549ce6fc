// softcap_fast (softcap_fast.h): cap * tanh(x / cap), 8 lanes at a time.
#include "backend/cpu/softcap_fast.h"

#include "backend/cpu/exp_avx2.h"
#include "backend/cpu/map_avx2.h"

namespace llmctl::cpu {

namespace {
__attribute__((target("avx2,fma"))) inline __m256 softcap8(__m256 x, __m256 cap) {
  return _mm256_mul_ps(cap, tanh8_avx2(_mm256_div_ps(x, cap)));
}
}  // namespace

__attribute__((target("avx2,fma"))) void softcap_fast(float* x, int64_t n, float cap) {
  map1_avx2<softcap8>(x, cap, n);
}

}  // namespace llmctl::cpu
