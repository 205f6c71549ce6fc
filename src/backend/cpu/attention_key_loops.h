#pragma once
// The key loops of the fast attention kernel (attention_fast.cpp; internal to it): scores of a
// group's heads against a run of keys, and their weighted sums of the values, in AVX2 and
// AVX-512 versions with the same bits. A K or V row is read where it lies in the pool through
// attention_kv_load.h; `off[j]` is key j's row offset from the pool's base.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "backend/cpu/attention_kv_load.h"

namespace llmctl::cpu::attn_loops {

using kv_load::load1;
using kv_load::load8;
using kv_load::load8x2;
using kv_load::load16;

// Lanes summed in one fixed order.
__attribute__((target("avx2,fma,f16c"))) inline float hsum(__m256 v) {
  const __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  __m128 s = _mm_add_ps(lo, hi);
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

#define LLMCTL_ATTN_AVX2 __attribute__((target("avx2,fma,f16c")))

// hsum of 4 chains at once: the same additions as hsum (lanes l and l + 4, then 0 + 2 and
// 1 + 3, then those two), so the same bits for fewer shuffles. Returns the 4 sums in order.
LLMCTL_ATTN_AVX2 inline __m128 hsum4(const __m256 a[4]) {
  // lanes 0-3 of a chain with its lanes 4-7: (a0 | a1) and (a2 | a3)
  const __m256 s01 = _mm256_add_ps(_mm256_permute2f128_ps(a[0], a[1], 0x20),
                                   _mm256_permute2f128_ps(a[0], a[1], 0x31));
  const __m256 s23 = _mm256_add_ps(_mm256_permute2f128_ps(a[2], a[3], 0x20),
                                   _mm256_permute2f128_ps(a[2], a[3], 0x31));
  // (s0 + s2, s1 + s3) of a0, a2 | of a1, a3
  const __m256 t = _mm256_add_ps(_mm256_shuffle_ps(s01, s23, _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm256_shuffle_ps(s01, s23, _MM_SHUFFLE(3, 2, 3, 2)));
  // (sum a0, sum a2, ...) | (sum a1, sum a3, ...)
  const __m256 u = _mm256_add_ps(_mm256_shuffle_ps(t, t, _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm256_shuffle_ps(t, t, _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm_unpacklo_ps(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1));
}


// The K and V rows a key loop reads lie one per key, a row's bytes apart in the cache's pages
// (3 KV groups: 128 bytes of every 384 at head dim 64), which the hardware prefetchers follow
// badly: 35 % of the scores loop's time at 4k positions waited on its first load of a row.
// The key loops ask for the rows this many keys ahead (a few hundred cycles of work).
constexpr int64_t kPrefetchKeys = 32;

// Every 64-byte line of bytes at p (into L1: the loop reads it within microseconds).
LLMCTL_ATTN_AVX2 inline void prefetch_row(const uint8_t* p, int64_t bytes) {
  for (int64_t o = 0; o < bytes; o += 64) _mm_prefetch(reinterpret_cast<const char*>(p + o), _MM_HINT_T0);
}

// Scaled scores of HN heads (query rows q, q + d, ...) against keys 0 .. n_kv-1, two keys at a
// time: each K row is loaded once for the HN heads of its group. Per (head, key) the dot
// product is one 8-lane FMA chain over the dimensions in order, then hsum and the scalar tail:
// the same arithmetic whatever HN and whichever key it is paired with.
// Keys j0 .. n_kv - 1 (the AVX-512 loop hands over its last keys); head h's score of key j at
// scores[h * ld + j] (ld >= n_kv: a chunk of keys writes into a query's longer rows).
template <BufferType T, size_t HN>
LLMCTL_ATTN_AVX2 void group_scores(const float* q, const uint8_t* kbase, const size_t* off,
                                   int64_t d, int64_t j0, int64_t n_kv, float scale,
                                   float* scores, int64_t ld) {
  const int64_t d8 = d / 8 * 8;
  const auto dot_tail = [&](const float* qh, const void* k, float dot) {
    for (int64_t i = d8; i < d; ++i) dot = std::fma(qh[i], load1<T>(k, i), dot);
    return dot;
  };
  int64_t j = j0;
  // d a multiple of 8: 4 keys at a time for 1 or 2 heads, 2 for 3 or 4 (what the 16 ymm
  // registers hold), their chains reduced 4 at a time by hsum4
  constexpr size_t kKeys = HN <= 2 ? 4 : 2;
  const auto row_bytes = static_cast<int64_t>(kv_load::pool_offset(T, d));
  for (; d8 == d && j + static_cast<int64_t>(kKeys) <= n_kv; j += static_cast<int64_t>(kKeys)) {
    if (j + kPrefetchKeys + static_cast<int64_t>(kKeys) <= n_kv)
      for (size_t p = 0; p < kKeys; ++p)
        prefetch_row(kbase + off[j + kPrefetchKeys + static_cast<int64_t>(p)], row_bytes);
    __m256 acc[HN][kKeys];
    for (size_t h = 0; h < HN; ++h)
      for (size_t e = 0; e < kKeys; ++e) acc[h][e] = _mm256_setzero_ps();
    for (int64_t i = 0; i < d; i += 8) {
      __m256 kv[kKeys];
      for (size_t e = 0; e < kKeys; ++e) kv[e] = load8<T>(kbase + off[j + static_cast<int64_t>(e)], i);
      for (size_t h = 0; h < HN; ++h) {
        const __m256 qv = _mm256_loadu_ps(q + static_cast<int64_t>(h) * d + i);
        for (size_t e = 0; e < kKeys; ++e) acc[h][e] = _mm256_fmadd_ps(qv, kv[e], acc[h][e]);
      }
    }
    const __m128 sc = _mm_set1_ps(scale);
    if constexpr (kKeys == 4) {
      for (size_t h = 0; h < HN; ++h)
        _mm_storeu_ps(scores + static_cast<int64_t>(h) * ld + j, _mm_mul_ps(hsum4(acc[h]), sc));
    } else {
      for (size_t h = 0; h + 1 < HN; h += 2) {  // heads h and h + 1, keys j and j + 1
        const __m256 four[4] = {acc[h][0], acc[h][1], acc[h + 1][0], acc[h + 1][1]};
        float r[4];
        _mm_storeu_ps(r, _mm_mul_ps(hsum4(four), sc));
        for (size_t u = 0; u < 4; ++u)
          scores[static_cast<int64_t>(h + u / 2) * ld + j + static_cast<int64_t>(u % 2)] = r[u];
      }
      if constexpr (HN % 2 == 1)
        for (size_t e = 0; e < 2; ++e)
          scores[static_cast<int64_t>(HN - 1) * ld + j + static_cast<int64_t>(e)] =
              hsum(acc[HN - 1][e]) * scale;
    }
  }
  for (; j + 2 <= n_kv; j += 2) {
    const void* k[2] = {kbase + off[j], kbase + off[j + 1]};
    __m256 acc[2][HN];
    for (size_t e = 0; e < 2; ++e)
      for (size_t h = 0; h < HN; ++h) acc[e][h] = _mm256_setzero_ps();
    for (int64_t i = 0; i < d8; i += 8) {
      const __m256 k0 = load8<T>(k[0], i), k1 = load8<T>(k[1], i);
      for (size_t h = 0; h < HN; ++h) {
        const __m256 qv = _mm256_loadu_ps(q + static_cast<int64_t>(h) * d + i);
        acc[0][h] = _mm256_fmadd_ps(qv, k0, acc[0][h]);
        acc[1][h] = _mm256_fmadd_ps(qv, k1, acc[1][h]);
      }
    }
    for (size_t h = 0; h < HN; ++h)
      for (size_t e = 0; e < 2; ++e)
        scores[static_cast<int64_t>(h) * ld + j + static_cast<int64_t>(e)] =
            dot_tail(q + static_cast<int64_t>(h) * d, k[e], hsum(acc[e][h])) * scale;
  }
  for (; j < n_kv; ++j) {
    const void* k = kbase + off[j];
    __m256 acc[HN];
    for (size_t h = 0; h < HN; ++h) acc[h] = _mm256_setzero_ps();
    for (int64_t i = 0; i < d8; i += 8) {
      const __m256 kv = load8<T>(k, i);
      for (size_t h = 0; h < HN; ++h)
        acc[h] = _mm256_fmadd_ps(_mm256_loadu_ps(q + static_cast<int64_t>(h) * d + i), kv, acc[h]);
    }
    for (size_t h = 0; h < HN; ++h)
      scores[static_cast<int64_t>(h) * ld + j] =
          dot_tail(q + static_cast<int64_t>(h) * d, k, hsum(acc[h])) * scale;
  }
}

// Dimensions c .. c + 8 W - 1 of the HN heads' outputs: W x HN accumulators in registers over
// all keys, each V slice loaded once for the group. Per output element one fma chain over the
// keys in order, starting from zero, whatever HN and W; or, with `more`, from the value o
// holds (an earlier chunk of keys' chain, stored exactly: chunks give the whole chain's bits).
// Head h's weight of key j at a[h * ld + j].
template <BufferType T, size_t HN, size_t W>
LLMCTL_ATTN_AVX2 void values_slice(const float* a, const uint8_t* vbase, const size_t* off,
                                   int64_t d, int64_t n_kv, int64_t c, float* o, int64_t ld,
                                   bool more) {
  __m256 acc[HN][W];
  for (size_t h = 0; h < HN; ++h)
    for (size_t u = 0; u < W; ++u)
      acc[h][u] = more ? _mm256_loadu_ps(o + static_cast<int64_t>(h) * d + c +
                                         8 * static_cast<int64_t>(u))
                       : _mm256_setzero_ps();
  const int64_t slice_bytes =
      std::max<int64_t>(1, static_cast<int64_t>(kv_load::pool_offset(T, 8 * W)));
  const size_t slice_at = kv_load::pool_offset(T, c);
  for (int64_t j = 0; j < n_kv; ++j) {
    const void* v = vbase + off[j];
    if (j + kPrefetchKeys < n_kv) prefetch_row(vbase + off[j + kPrefetchKeys] + slice_at, slice_bytes);
    __m256 vv[W];
    for (size_t u = 0; u < W; ++u) vv[u] = load8<T>(v, c + 8 * static_cast<int64_t>(u));
    for (size_t h = 0; h < HN; ++h) {
      const __m256 a8 = _mm256_set1_ps(a[static_cast<int64_t>(h) * ld + j]);
      for (size_t u = 0; u < W; ++u) acc[h][u] = _mm256_fmadd_ps(a8, vv[u], acc[h][u]);
    }
  }
  for (size_t h = 0; h < HN; ++h)
    for (size_t u = 0; u < W; ++u)
      _mm256_storeu_ps(o + static_cast<int64_t>(h) * d + c + 8 * static_cast<int64_t>(u),
                       acc[h][u]);
}

// out rows (o, o + d, ...) of HN heads = sum_j a[h][j] V[j], in slices of kW x 8 dimensions
// (compile-time widths, so the accumulators stay in registers: 2 x 8 for 3 or 4 heads, 4 x 8
// for 1 or 2), then the last < 8 dimensions one scalar chain each. Dimensions c0 .. c1 - 1
// only (c0 a multiple of 8; c1 a multiple of 8 or d): the AVX-512 loop hands over the
// dimensions it leaves, and attend_rows_values_dims splits a head's dimensions over threads.
// ld, more: values_slice.
template <BufferType T, size_t HN>
LLMCTL_ATTN_AVX2 void group_values(const float* a, const uint8_t* vbase, const size_t* off,
                                   int64_t d, int64_t n_kv, float* o, int64_t ld, bool more,
                                   int64_t c0, int64_t c1) {
  constexpr size_t kW = HN > 2 ? 2 : 4;
  const int64_t d8 = std::min(c1, d / 8 * 8), step = 8 * static_cast<int64_t>(kW);
  int64_t c = c0;
  for (; c + step <= d8; c += step)
    values_slice<T, HN, kW>(a, vbase, off, d, n_kv, c, o, ld, more);
  for (; c < d8; c += 8) values_slice<T, HN, 1>(a, vbase, off, d, n_kv, c, o, ld, more);
  for (size_t h = 0; h < HN; ++h) {
    for (int64_t i = d8; i < c1; ++i) {
      float out = more ? o[static_cast<int64_t>(h) * d + i] : 0.0f;
      for (int64_t j = 0; j < n_kv; ++j)
        out = std::fma(a[static_cast<int64_t>(h) * ld + j], load1<T>(vbase + off[j], i), out);
      o[static_cast<int64_t>(h) * d + i] = out;
    }
  }
}

// AVX-512 versions of the two loops, with the AVX2 loops' bits: every (head, key) score is the
// same 8-lane FMA chain and hsum, two keys side by side in one zmm (lanes 0..7 key j, 8..15
// key j + 1), and every output element the same fma chain over the keys, 16 dimensions per
// zmm. So a machine with AVX-512 gives the logits of one with AVX2 only; the speed differs.
#define LLMCTL_ATTN_AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512dq")))
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which -W(maybe-)uninitialized
// reports once inlined (a false positive; matmul_kernels.h has the same): off from here to the
// end of this file, and again in attention_fast.cpp where the loops are inlined.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

// hsum of 8 keys' 8-lane chains at once, z[p] = (key 2p | key 2p + 1): the same additions as
// hsum (lanes l and l + 4, then 0 + 2 and 1 + 3, then those two), on 8 keys side by side, so
// the same bits for a quarter of the shuffles. Returns the 8 sums in key order.
LLMCTL_ATTN_AVX512 inline __m256 hsum_keys8(const __m512 z[4]) {
  // lanes 0-3 of each key with its lanes 4-7: keys 0-3 in s01, 4-7 in s45 (4 lanes each)
  const __m512 s01 = _mm512_add_ps(_mm512_shuffle_f32x4(z[0], z[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_f32x4(z[0], z[1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512 s45 = _mm512_add_ps(_mm512_shuffle_f32x4(z[2], z[3], _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_f32x4(z[2], z[3], _MM_SHUFFLE(3, 1, 3, 1)));
  // 128-bit lane L: (s0 + s2, s1 + s3) of key L, then of key L + 4
  const __m512 t = _mm512_add_ps(_mm512_shuffle_ps(s01, s45, _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm512_shuffle_ps(s01, s45, _MM_SHUFFLE(3, 2, 3, 2)));
  // lane L: the sums of key L and key L + 4 in its first two elements
  const __m512 u = _mm512_add_ps(_mm512_shuffle_ps(t, t, _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_ps(t, t, _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_castps512_ps256(_mm512_permutexvar_ps(order, u));
}

// The whole 8-key blocks of NT queries of HN heads each over the same keys (NT tokens of one
// group in a prefill tile; 1 for a single query), when d is a multiple of 8: four zmm of two
// keys each per head, reduced together by hsum_keys8; each block's rows loaded and converted
// once for all the queries (NT x HN x 4 accumulators). Query t's heads at q[t] + h * d, its
// scores at scores[t] + h * ld[t] + j. Returns the keys done (a multiple of 8).
template <BufferType T, size_t HN, size_t NT>
LLMCTL_ATTN_AVX512 int64_t scores_blocks8_avx512(const float* const q[], const uint8_t* kbase,
                                                 const size_t* off, int64_t d, int64_t n_kv,
                                                 float scale, float* const scores[],
                                                 const int64_t ld[]) {
  static_assert(HN * NT <= 6 || NT == 1, "NT x HN x 4 accumulators, 4 key pairs, a broadcast");
  const auto row_bytes = static_cast<int64_t>(kv_load::pool_offset(T, d));
  int64_t j = 0;
  for (; d % 8 == 0 && j + 8 <= n_kv; j += 8) {
    if (j + kPrefetchKeys + 8 <= n_kv)
      for (int64_t p = 0; p < 8; ++p) prefetch_row(kbase + off[j + kPrefetchKeys + p], row_bytes);
    __m512 acc[NT][HN][4];
    for (size_t t = 0; t < NT; ++t)
      for (size_t h = 0; h < HN; ++h)
        for (size_t p = 0; p < 4; ++p) acc[t][h][p] = _mm512_setzero_ps();
    for (int64_t i = 0; i < d; i += 8) {
      __m512 kp[4];
      for (size_t p = 0; p < 4; ++p)
        kp[p] = load8x2<T>(kbase + off[j + 2 * static_cast<int64_t>(p)],
                           kbase + off[j + 2 * static_cast<int64_t>(p) + 1], i);
      for (size_t t = 0; t < NT; ++t)
        for (size_t h = 0; h < HN; ++h) {
          const __m512 qv =
              _mm512_broadcast_f32x8(_mm256_loadu_ps(q[t] + static_cast<int64_t>(h) * d + i));
          for (size_t p = 0; p < 4; ++p) acc[t][h][p] = _mm512_fmadd_ps(qv, kp[p], acc[t][h][p]);
        }
    }
    for (size_t t = 0; t < NT; ++t)
      for (size_t h = 0; h < HN; ++h)
        _mm256_storeu_ps(scores[t] + static_cast<int64_t>(h) * ld[t] + j,
                         _mm256_mul_ps(hsum_keys8(acc[t][h]), _mm256_set1_ps(scale)));
  }
  return j;
}

// group_scores over keys 8 at a time when d is a multiple of 8 (scores_blocks8_avx512), then 4
// at a time (two zmm, hsum per key: the dimensions past the last 8 follow one by one); the last
// < 4 keys go to group_scores itself.
template <BufferType T, size_t HN>
LLMCTL_ATTN_AVX512 void group_scores_avx512(const float* q, const uint8_t* kbase, const size_t* off,
                                            int64_t d, int64_t n_kv, float scale,
                                            float* scores, int64_t ld) {
  const int64_t d8 = d / 8 * 8;
  const float* const qs[1] = {q};
  float* const ss[1] = {scores};
  const int64_t lds[1] = {ld};
  int64_t j = scores_blocks8_avx512<T, HN, 1>(qs, kbase, off, d, n_kv, scale, ss, lds);
  for (; j + 4 <= n_kv; j += 4) {
    const void* k[4] = {kbase + off[j], kbase + off[j + 1], kbase + off[j + 2], kbase + off[j + 3]};
    __m512 acc[2][HN];
    for (size_t e = 0; e < 2; ++e)
      for (size_t h = 0; h < HN; ++h) acc[e][h] = _mm512_setzero_ps();
    for (int64_t i = 0; i < d8; i += 8) {
      const __m512 k01 = load8x2<T>(k[0], k[1], i), k23 = load8x2<T>(k[2], k[3], i);
      for (size_t h = 0; h < HN; ++h) {
        const __m512 qv = _mm512_broadcast_f32x8(_mm256_loadu_ps(q + static_cast<int64_t>(h) * d + i));
        acc[0][h] = _mm512_fmadd_ps(qv, k01, acc[0][h]);
        acc[1][h] = _mm512_fmadd_ps(qv, k23, acc[1][h]);
      }
    }
    for (size_t h = 0; h < HN; ++h) {
      const float* qh = q + static_cast<int64_t>(h) * d;
      for (size_t e = 0; e < 4; ++e) {
        const __m512 pair = acc[e / 2][h];
        const __m256 lanes = e % 2 == 0 ? _mm512_castps512_ps256(pair) : _mm512_extractf32x8_ps(pair, 1);
        float dot = hsum(lanes);
        for (int64_t i = d8; i < d; ++i) dot = std::fma(qh[i], load1<T>(k[e], i), dot);
        scores[static_cast<int64_t>(h) * ld + j + static_cast<int64_t>(e)] = dot * scale;
      }
    }
  }
  group_scores<T, HN>(q, kbase, off, d, j, n_kv, scale, scores, ld);  // the last < 4 keys
}

// group_scores_avx512 for NT queries (HN x NT <= 6) over the same keys: the 8-key blocks of all
// of them in one pass (scores_blocks8_avx512), the keys past the last whole 8 per query. Each
// (query, key) score has group_scores_avx512's arithmetic, so the same bits.
template <BufferType T, size_t HN, size_t NT>
LLMCTL_ATTN_AVX512 void tokens_scores_avx512(const float* const q[], const uint8_t* kbase,
                                             const size_t* off, int64_t d, int64_t n_kv,
                                             float scale, float* const scores[],
                                             const int64_t ld[]) {
  const int64_t j = scores_blocks8_avx512<T, HN, NT>(q, kbase, off, d, n_kv, scale, scores, ld);
  for (size_t t = 0; t < NT; ++t)
    group_scores_avx512<T, HN>(q[t], kbase, off + j, d, n_kv - j, scale, scores[t] + j, ld[t]);
}

// values_slice over 16 W dimensions (c .. c + 16 W - 1) for NT queries of HN heads each over
// the same keys (NT tokens of one group in a prefill tile; 1 for a single query): each key's
// slice loaded and converted once for all the queries (NT x HN x W accumulators). Query t's
// weights a[t] + h * ld[t] + j, its outputs o[t] + h * d, more[t] as `more`.
template <BufferType T, size_t HN, size_t NT, size_t W>
LLMCTL_ATTN_AVX512 void values_slice_avx512(const float* const a[], const int64_t ld[],
                                            const uint8_t* vbase, const size_t* off, int64_t d,
                                            int64_t n_kv, int64_t c, float* const o[],
                                            const bool more[]) {
  static_assert(HN * NT * W <= 24 || NT == 1, "NT x HN x W accumulators, W slices, a broadcast");
  __m512 acc[NT][HN][W];
  for (size_t t = 0; t < NT; ++t)
    for (size_t h = 0; h < HN; ++h)
      for (size_t u = 0; u < W; ++u)
        acc[t][h][u] = more[t] ? _mm512_loadu_ps(o[t] + static_cast<int64_t>(h) * d + c +
                                                 16 * static_cast<int64_t>(u))
                               : _mm512_setzero_ps();
  const int64_t slice_bytes =
      std::max<int64_t>(1, static_cast<int64_t>(kv_load::pool_offset(T, 16 * W)));
  const size_t slice_at = kv_load::pool_offset(T, c);
  for (int64_t j = 0; j < n_kv; ++j) {
    const void* v = vbase + off[j];
    if (j + kPrefetchKeys < n_kv)
      prefetch_row(vbase + off[j + kPrefetchKeys] + slice_at, slice_bytes);
    __m512 vv[W];
    for (size_t u = 0; u < W; ++u) vv[u] = load16<T>(v, c + 16 * static_cast<int64_t>(u));
    for (size_t t = 0; t < NT; ++t)
      for (size_t h = 0; h < HN; ++h) {
        const __m512 a16 = _mm512_set1_ps(a[t][static_cast<int64_t>(h) * ld[t] + j]);
        for (size_t u = 0; u < W; ++u) acc[t][h][u] = _mm512_fmadd_ps(a16, vv[u], acc[t][h][u]);
      }
  }
  for (size_t t = 0; t < NT; ++t)
    for (size_t h = 0; h < HN; ++h)
      for (size_t u = 0; u < W; ++u)
        _mm512_storeu_ps(o[t] + static_cast<int64_t>(h) * d + c + 16 * static_cast<int64_t>(u),
                         acc[t][h][u]);
}

// group_values_avx512 for NT queries of HN heads each over the same keys (HN x NT <= 6), d a
// multiple of 64: values_slice_avx512 over slices of 4 x 16 dimensions. Each output's chain is
// the single query's, so the same bits.
template <BufferType T, size_t HN, size_t NT>
LLMCTL_ATTN_AVX512 void tokens_values_avx512(const float* const a[], const int64_t ld[],
                                             const uint8_t* vbase, const size_t* off, int64_t d,
                                             int64_t n_kv, float* const o[], const bool more[]) {
  for (int64_t c = 0; c + 64 <= d; c += 64)
    values_slice_avx512<T, HN, NT, 4>(a, ld, vbase, off, d, n_kv, c, o, more);
}

// group_values in slices of 4 x 16 dimensions, then 2 x 16, then 16, then group_values itself
// for what is left (an 8-lane slice, the scalar tail). Dimensions c0 .. c1 - 1 (group_values).
template <BufferType T, size_t HN>
LLMCTL_ATTN_AVX512 void group_values_avx512(const float* a, const uint8_t* vbase, const size_t* off,
                                            int64_t d, int64_t n_kv, float* o, int64_t ld,
                                            bool more, int64_t c0, int64_t c1) {
  const int64_t d16 = std::min(c1, d / 16 * 16);
  const float* const as[1] = {a};
  const int64_t lds[1] = {ld};
  float* const os[1] = {o};
  const bool mores[1] = {more};
  int64_t c = c0;
  for (; c + 64 <= d16; c += 64)
    values_slice_avx512<T, HN, 1, 4>(as, lds, vbase, off, d, n_kv, c, os, mores);
  for (; c + 32 <= d16; c += 32)
    values_slice_avx512<T, HN, 1, 2>(as, lds, vbase, off, d, n_kv, c, os, mores);
  for (; c < d16; c += 16) values_slice_avx512<T, HN, 1, 1>(as, lds, vbase, off, d, n_kv, c, os, mores);
  if (c < c1) group_values<T, HN>(a, vbase, off, d, n_kv, o, ld, more, c, c1);
}

#pragma GCC diagnostic pop

}  // namespace llmctl::cpu::attn_loops
