#pragma once
// Numerically stable softmax shared by every backend (plain inline C++, see rope_math.h).
//   y[i] = exp(x[i] - max(x)) / sum_j exp(x[j] - max(x))
// Subtracting the max keeps every exp() argument <= 0, so nothing overflows and the largest
// term is exactly 1 (the sum is >= 1, never 0). A -inf entry (masked) gives 0.

#include <cmath>
#include <cstdint>

namespace llmctl {

// Softmax of x[0..n) in place; n >= 1. The sum is accumulated in double: n can be the
// context length (many thousands of small terms).
inline void softmax_inplace(float* x, int64_t n) {
  float max_v = x[0];
  for (int64_t i = 1; i < n; ++i)
    if (x[i] > max_v) max_v = x[i];
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max_v);
    sum += static_cast<double>(x[i]);
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

// Softmax of x[0..n) with an attention sink (gpt-oss: one logit per head that takes part in
// the denominator but has no value row), as llama.cpp's soft_max_ext with sinks computes it:
//   m = max(max(x), sink);  y[i] = exp(x[i] - m) / (sum_j exp(x[j] - m) + exp(sink - m))
// so the y sum to less than 1. n >= 1; sink finite.
inline void softmax_sink_inplace(float* x, int64_t n, float sink) {
  float max_v = x[0];
  for (int64_t i = 1; i < n; ++i)
    if (x[i] > max_v) max_v = x[i];
  if (sink > max_v) max_v = sink;
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max_v);
    sum += static_cast<double>(x[i]);
  }
  sum += static_cast<double>(std::exp(sink - max_v));
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace llmctl
