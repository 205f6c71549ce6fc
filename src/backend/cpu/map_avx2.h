#pragma once
// Element-wise loops of the fast CPU backend's 8-lane functions (silu_mul_fast, gelu_mul_fast,
// softcap_fast): whole vectors of 8, then the last n % 8 elements through the same lanes,
// padded with zeros (whose results are dropped), so every element gets the same arithmetic
// wherever it sits in the array (batch invariance). Outputs may alias inputs. The lane
// function is a template argument, so it is inlined into the loop.

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace llmctl::cpu {

// The last m < 8 elements of `src`, zero-padded to 8 lanes.
__attribute__((target("avx2,fma"))) inline __m256 load_tail8(const float* src, int64_t m) {
  float t[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::memcpy(t, src, static_cast<size_t>(m) * sizeof(float));
  return _mm256_loadu_ps(t);
}

__attribute__((target("avx2,fma"))) inline void store_tail8(float* dst, __m256 v, int64_t m) {
  float t[8];
  _mm256_storeu_ps(t, v);
  std::memcpy(dst, t, static_cast<size_t>(m) * sizeof(float));
}

// out[i] = F(a, b) lane by lane, i < n.
template <__m256 (*F)(__m256, __m256)>
__attribute__((target("avx2,fma"))) inline void map2_avx2(const float* a, const float* b, int64_t n,
                                                          float* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, F(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  if (i < n) store_tail8(out + i, F(load_tail8(a + i, n - i), load_tail8(b + i, n - i)), n - i);
}

// x[i] = F(x, c) lane by lane, i < n, in place; c broadcast to every lane.
template <__m256 (*F)(__m256, __m256)>
__attribute__((target("avx2,fma"))) inline void map1_avx2(float* x, float c, int64_t n) {
  const __m256 cv = _mm256_set1_ps(c);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, F(_mm256_loadu_ps(x + i), cv));
  if (i < n) store_tail8(x + i, F(load_tail8(x + i, n - i), cv), n - i);
}

}  // namespace llmctl::cpu
