// Vectorized paged attention for one (token, head) (attention_fast.h).
#include "backend/cpu/attention_fast.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "backend/cpu/cpu_backend.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/fp16.h"
#include "core/softmax.h"

namespace llmctl::cpu {

namespace {

// 8 lanes of a K or V head row from an f32 or f16 pool.
__attribute__((target("avx2,fma,f16c"))) inline __m256 load8(const void* row, bool f16, int64_t i) {
  if (f16)
    return _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(row) + i)));
  return _mm256_loadu_ps(static_cast<const float*>(row) + i);
}

inline float load1(const void* row, bool f16, int64_t i) {
  return f16 ? fp16_to_f32(static_cast<const uint16_t*>(row)[i])
             : static_cast<const float*>(row)[i];
}

// Lanes summed in one fixed order.
__attribute__((target("avx2,fma,f16c"))) inline float hsum(__m256 v) {
  const __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  __m128 s = _mm_add_ps(lo, hi);
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

__attribute__((target("avx2,fma,f16c"))) void attend(const float* qh, const PagedKv& kv,
                                                     const int32_t* blocks, int64_t n_kv,
                                                     int64_t kv_dim, int64_t g, int64_t d,
                                                     float* oh, std::vector<float>& scores,
                                                     float* stats) {
  const bool f16 = kv.k_pool->type() == BufferType::F16;
  const size_t es = f16 ? 2 : 4;
  const auto* kbase = static_cast<const uint8_t*>(kv.k_pool->raw());
  const auto* vbase = static_cast<const uint8_t*>(kv.v_pool->raw());
  const int64_t n_blocks = kv.k_pool->size() / (kv_dim * kv.block_size);
  const auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  const int64_t d8 = d / 8 * 8;
  scores.resize(static_cast<size_t>(n_kv));
  const auto row_offset = [&](int64_t j) {
    const int32_t b = blocks[j / kv.block_size];
    LLMCTL_ASSERT(b >= 0 && b < n_blocks);
    const int64_t slot = int64_t{b} * kv.block_size + j % kv.block_size;
    return static_cast<size_t>(slot * kv_dim + g * d) * es;
  };
  // Scores: four keys at a time, so that four independent FMA chains hide the FMA latency
  // (each key's dot product is still the same chain in the same order as one at a time).
  const auto dot_tail = [&](const void* k, float dot) {
    for (int64_t i = d8; i < d; ++i) dot = std::fma(qh[i], load1(k, f16, i), dot);
    return dot;
  };
  int64_t j = 0;
  for (; j + 4 <= n_kv; j += 4) {
    const void* k[4];
    __m256 acc[4];
    for (int u = 0; u < 4; ++u) {
      k[u] = kbase + row_offset(j + u);
      acc[u] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < d8; i += 8) {
      const __m256 qv = _mm256_loadu_ps(qh + i);
      for (int u = 0; u < 4; ++u) acc[u] = _mm256_fmadd_ps(qv, load8(k[u], f16, i), acc[u]);
    }
    for (int u = 0; u < 4; ++u)
      scores[static_cast<size_t>(j + u)] = dot_tail(k[u], hsum(acc[u])) * scale;
  }
  for (; j < n_kv; ++j) {
    const void* k = kbase + row_offset(j);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < d8; i += 8)
      acc = _mm256_fmadd_ps(_mm256_loadu_ps(qh + i), load8(k, f16, i), acc);
    scores[static_cast<size_t>(j)] = dot_tail(k, hsum(acc)) * scale;
  }
  if (stats != nullptr) attn_score_stats(scores.data(), n_kv, stats);
  softmax_inplace(scores.data(), n_kv);
  if (stats != nullptr) attn_softmax_entropy(scores.data(), n_kv, stats);
  // Output: up to 64 dimensions at a time held in 8 registers over all keys (oh[i] is the
  // same fma chain over j in order as through memory, without a store and reload per key).
  for (int64_t c = 0; c < d8; c += 64) {
    const int64_t w = std::min<int64_t>(64, d8 - c) / 8;
    __m256 acc[8];
    for (int64_t u = 0; u < w; ++u) acc[u] = _mm256_setzero_ps();
    for (int64_t jj = 0; jj < n_kv; ++jj) {
      const void* v = vbase + row_offset(jj);
      const __m256 a8 = _mm256_set1_ps(scores[static_cast<size_t>(jj)]);
      for (int64_t u = 0; u < w; ++u)
        acc[u] = _mm256_fmadd_ps(a8, load8(v, f16, c + 8 * u), acc[u]);
    }
    for (int64_t u = 0; u < w; ++u) _mm256_storeu_ps(oh + c + 8 * u, acc[u]);
  }
  for (int64_t i = d8; i < d; ++i) {
    float o = 0.0f;
    for (int64_t jj = 0; jj < n_kv; ++jj)
      o = std::fma(scores[static_cast<size_t>(jj)], load1(vbase + row_offset(jj), f16, i), o);
    oh[i] = o;
  }
}

}  // namespace

bool attention_fast_available() {
  const CpuFeatures& f = cpu_features();
  return f.avx2 && f.fma && f.f16c;
}

void attend_head_fast(const Buffer& q, const PagedKv& kv, int64_t t, int64_t h,
                      const AttentionShape& s, Buffer& out, std::vector<float>& scores,
                      float* stats) {
  const int64_t group = s.n_heads / s.n_kv_heads;
  const int64_t kv_dim = s.n_kv_heads * s.head_dim;
  const int32_t row = kv.token_seq->i32()[t];
  const int32_t pos = kv.positions->i32()[t];
  LLMCTL_ASSERT(row >= 0 && pos >= 0 && (pos / kv.block_size) < kv.max_blocks);
  LLMCTL_ASSERT((static_cast<int64_t>(row) + 1) * kv.max_blocks <= kv.block_table->size());
  attend(q.data() + (t * s.n_heads + h) * s.head_dim, kv,
         kv.block_table->i32() + row * kv.max_blocks, int64_t{pos} + 1, kv_dim, h / group,
         s.head_dim, out.data() + (t * s.n_heads + h) * s.head_dim, scores, stats);
}

}  // namespace llmctl::cpu
