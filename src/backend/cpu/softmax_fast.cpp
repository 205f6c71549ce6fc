// softmax_fast (softmax_fast.h): Cephes-style expf in AVX2 lanes.
#include "backend/cpu/softmax_fast.h"

#include <cstring>

#include "backend/cpu/exp_avx2.h"

namespace llmctl::cpu {

namespace {

#define LLMCTL_SOFTMAX_AVX2 __attribute__((target("avx2,fma")))

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
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, exp8_avx2(_mm256_loadu_ps(x + i)));
  if (i < n) store_tail(y + i, exp8_avx2(load_tail(x + i, n - i)), n - i);
}

LLMCTL_SOFTMAX_AVX2 void softmax_fast(float* x, int64_t n, const float* sink) {
  // The max exactly as softmax_inplace takes it (a NaN x[0] stays, later NaNs never win), 8
  // lanes at a time: every lane starts at x[0], and max_ps(v, m) returns m when v is NaN (and
  // stays NaN when m is). The max of the rest is exact, so any order gives it; only the sign
  // of a zero max can differ, and x - (+0) equals x - (-0) but for x = -0, whose exp is 1
  // either way.
  __m256 mv = _mm256_set1_ps(x[0]);
  int64_t j = 1;
  for (; j + 8 <= n; j += 8) mv = _mm256_max_ps(_mm256_loadu_ps(x + j), mv);
  float lanes[8];
  _mm256_storeu_ps(lanes, mv);
  float max_v = lanes[0];
  for (int k = 1; k < 8; ++k)
    if (lanes[k] > max_v) max_v = lanes[k];
  for (; j < n; ++j)
    if (x[j] > max_v) max_v = x[j];
  if (sink != nullptr && *sink > max_v) max_v = *sink;
  const __m256 m = _mm256_set1_ps(max_v);
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = exp8_avx2(_mm256_sub_ps(_mm256_loadu_ps(x + i), m));
    _mm256_storeu_ps(x + i, e);
    add_to_sum(e, lo, hi);
  }
  if (i < n) {
    const int64_t r = n - i;
    __m256 e = exp8_avx2(_mm256_sub_ps(load_tail(x + i, r), m));
    store_tail(x + i, e, r);
    // the padding lanes must not count: zero them before summing
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    e = _mm256_and_ps(
        e, _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(r)), lane)));
    add_to_sum(e, lo, hi);
  }
  double s[4];
  _mm256_storeu_pd(s, _mm256_add_pd(lo, hi));
  double total = (s[0] + s[2]) + (s[1] + s[3]);
  if (sink != nullptr) {  // exp(sink - max) through the same lanes
    const float d = *sink - max_v;
    float e = 0.0f;
    exp_fast(&d, 1, &e);
    total += static_cast<double>(e);
  }
  const auto inv = static_cast<float>(1.0 / total);
  const __m256 vinv = _mm256_set1_ps(inv);
  i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vinv));
  for (; i < n; ++i) x[i] *= inv;
}

}  // namespace llmctl::cpu
