// Prefill attention a tile of query tokens at a time (attention_prefill_tile.h).
#include "backend/cpu/attention_prefill_tile.h"

#include <immintrin.h>

#include <algorithm>

#include "backend/cpu/attention_fast.h"
#include "backend/cpu/attention_kv_load.h"
#include "core/error.h"

namespace llmctl::cpu {

namespace {

// Tokens per tile: a tile decodes its rows once for this many queries, so the decode's share
// of the work falls as 1 / kMaxTile; past 16 the gain is small and fewer, larger tasks balance
// worse on few threads.
constexpr int64_t kMaxTile = 16;
// (tile, group) tasks wanted per thread, so the static split balances (tasks differ in cost).
constexpr int64_t kTasksPerThread = 4;
// Per-thread bytes of one tile's scores at most (they grow with the context: a tile holds all
// its tokens' scores between the passes): tiles shrink at long contexts instead.
constexpr int64_t kMaxTileScoreBytes = int64_t{4} << 20;
// At most this many tokens share a pass over their common keys (attend_tokens_per_pass).
constexpr int64_t kMaxPassTokens = 3;
// Bytes of f32 K or V rows per chunk of keys: a chunk stays in L1 while the tile's tokens read it.
constexpr int64_t kChunkBytes = int64_t{32} << 10;

// n rows of head_dim d (a multiple of 32: whole blocks), at base + off[j], as f32 rows of d
// into dst: each 8 lanes by load8, the kernel's own load, so dst holds the values it computes.
template <BufferType T>
LLMCTL_KV_AVX2 void decode_rows(const uint8_t* base, const size_t* off, int64_t n, int64_t d,
                                float* dst) {
  for (int64_t j = 0; j < n; ++j) {
    const void* row = base + off[j];
    float* o = dst + j * d;
    for (int64_t i = 0; i < d; i += 8) _mm256_storeu_ps(o + i, kv_load::load8<T>(row, i));
  }
}

// Rows of one pool for a chunk of keys: decoded into `f32` when the pool is of a block type
// (row j at f32 + f32_off[j]), else where they lie (row j at the pool's base + off[j]).
GroupRows chunk_rows(const Buffer& pool, const size_t* off, int64_t n, int64_t d,
                     std::vector<float>& f32, const size_t* f32_off) {
  const BufferType t = pool.type();
  const auto* base = static_cast<const uint8_t*>(pool.raw());
  if (!buffer_type_is_block(t)) return GroupRows{base, base, off, off, t, t};
  LLMCTL_ASSERT(d % 32 == 0);
  const auto need = static_cast<size_t>(n * d);
  if (f32.size() < need) f32.resize(need);  // grows only: no zero-fill per call
  if (t == BufferType::Q8_0)
    decode_rows<BufferType::Q8_0>(base, off, n, d, f32.data());
  else
    decode_rows<BufferType::Q4_0>(base, off, n, d, f32.data());
  const auto* rows = reinterpret_cast<const uint8_t*>(f32.data());
  return GroupRows{rows, rows, f32_off, f32_off, BufferType::F32, BufferType::F32};
}

// Tokens a .. b - 1, all of block-table row `row`, whose windows lie in key positions lo .. hi
// - 1; qk[i] is token a + i's keys. The keys go in chunks of about kChunkBytes of f32 rows,
// each chunk decoded once and read by every token while it is in L1: first the scores of all
// tokens, chunk by chunk, then each token's softmax, then the values, chunk by chunk (each
// output's fma chain going on from chunk to chunk).
void attend_run(const Buffer& q, const PagedKv& kv, int64_t a, int64_t b, const QueryKeys* qk,
                int64_t lo, int64_t hi, int64_t g, const AttentionShape& s, Buffer& out,
                std::vector<float>& scores, float* stats, bool avx512) {
  const int64_t d = s.head_dim, kv_dim = s.n_kv_heads * d, group = s.n_heads / s.n_kv_heads;
  const int64_t h0 = g * group, n_keys = hi - lo;
  const int64_t chunk = std::max<int64_t>(8, kChunkBytes / (d * int64_t{sizeof(float)}));
  const int32_t* blocks = kv.block_table->i32() + int64_t{qk[0].row} * kv.max_blocks;
  // per thread, reused across calls (never allocated per query): the pools' row offsets over
  // lo .. hi - 1 (V's only when its type differs from K's), one chunk of decoded rows and
  // their offsets, where each token's scores start in `scores` (the caller's, per thread)
  thread_local std::vector<size_t> k_off, v_off_own, f32_off;
  thread_local std::vector<float> f32;
  thread_local std::vector<int64_t> score_at;
  const BufferType kt = kv.k_pool->type(), vt = kv.v_pool->type();
  kv_row_offsets(kv, blocks, lo, n_keys, kv_dim, g, d, kt, k_off);
  if (vt != kt) kv_row_offsets(kv, blocks, lo, n_keys, kv_dim, g, d, vt, v_off_own);
  const std::vector<size_t>& v_off = vt != kt ? v_off_own : k_off;
  f32_off.resize(static_cast<size_t>(chunk));
  for (int64_t j = 0; j < chunk; ++j)
    f32_off[static_cast<size_t>(j)] = static_cast<size_t>(j * d) * sizeof(float);
  score_at.resize(static_cast<size_t>(b - a) + 1);
  score_at[0] = 0;
  for (int64_t i = 0; i < b - a; ++i)
    score_at[static_cast<size_t>(i) + 1] = score_at[static_cast<size_t>(i)] + group * qk[i].n_kv;
  if (scores.size() < static_cast<size_t>(score_at.back()))  // grows only
    scores.resize(static_cast<size_t>(score_at.back()));
  const float scale = attention_scale(s);
  const auto query = [&](int64_t i) { return q.data() + ((a + i) * s.n_heads + h0) * d; };
  const auto output = [&](int64_t i) { return out.data() + ((a + i) * s.n_heads + h0) * d; };
  const auto score_of = [&](int64_t i, int64_t x) {  // token i's scores at key x
    return scores.data() + score_at[static_cast<size_t>(i)] + (x - qk[i].first);
  };
  const auto in_chunk = [&](int64_t i, int64_t c0, int64_t c1, int64_t& x0, int64_t& x1) {
    x0 = std::max(c0, qk[i].first);
    x1 = std::min(c1, qk[i].first + qk[i].n_kv);
    return x0 < x1;
  };
  // Tokens per shared pass (attend_tokens_per_pass; the values' needs d a multiple of 64).
  const int64_t nt = attend_tokens_per_pass(group, avx512);
  const int64_t nt_values = d % 64 == 0 ? nt : 1;
  LLMCTL_ASSERT(nt <= kMaxPassTokens);
  // Whether tokens i .. i + n - 1 (n > 1) all read at least 8 keys of chunk c0 .. c1 - 1 in
  // common: each token's keys in the chunk x0[t] .. x1[t] - 1, the common ones both0 .. both1 - 1.
  const auto shared_keys = [&](int64_t i, int64_t n, int64_t c0, int64_t c1, int64_t* x0,
                               int64_t* x1, int64_t& both0, int64_t& both1) {
    if (n < 2 || i + n > b - a) return false;
    both0 = c0;
    both1 = c1;
    for (int64_t t = 0; t < n; ++t) {
      if (!in_chunk(i + t, c0, c1, x0[t], x1[t])) return false;
      both0 = std::max(both0, x0[t]);
      both1 = std::min(both1, x1[t]);
    }
    return both1 - both0 >= 8;
  };
  for (int64_t c0 = lo; c0 < hi; c0 += chunk) {
    const int64_t c1 = std::min(hi, c0 + chunk);
    const GroupRows k =
        chunk_rows(*kv.k_pool, k_off.data() + (c0 - lo), c1 - c0, d, f32, f32_off.data());
    // token i's scores of keys x0 .. x1 - 1 (in this chunk)
    const auto keys_of = [&](int64_t i, int64_t x0, int64_t x1) {
      if (x0 >= x1) return;
      const GroupRows rows{k.k, k.v, k.k_off + (x0 - c0), k.v_off, k.k_type, k.v_type};
      attend_rows_scores(query(i), rows, x1 - x0, scale, d, group, score_of(i, x0), qk[i].n_kv,
                         avx512);
    };
    for (int64_t i = 0; i < b - a;) {
      // with the next tokens, the keys they all read in one pass (each row converted once)
      int64_t x0[kMaxPassTokens], x1[kMaxPassTokens], both0 = 0, both1 = 0;
      if (shared_keys(i, nt, c0, c1, x0, x1, both0, both1)) {
        const float* qs[kMaxPassTokens];
        float* ss[kMaxPassTokens];
        int64_t ld[kMaxPassTokens];
        for (int64_t t = 0; t < nt; ++t) {
          qs[t] = query(i + t);
          ss[t] = score_of(i + t, both0);
          ld[t] = qk[i + t].n_kv;
        }
        const GroupRows rows{k.k, k.v, k.k_off + (both0 - c0), k.v_off, k.k_type, k.v_type};
        attend_rows_scores_tokens(nt, qs, rows, both1 - both0, scale, d, group, ss, ld);
        for (int64_t t = 0; t < nt; ++t) {  // the keys not all of them read
          keys_of(i + t, x0[t], both0);
          keys_of(i + t, both1, x1[t]);
        }
        i += nt;
        continue;
      }
      if (in_chunk(i, c0, c1, x0[0], x1[0])) keys_of(i, x0[0], x1[0]);
      ++i;
    }
  }
  const float* sinks = s.sinks.present() ? static_cast<const float*>(s.sinks.data) + h0 : nullptr;
  for (int64_t i = 0; i < b - a; ++i)
    attend_rows_softmax(
        scores.data() + score_at[static_cast<size_t>(i)],
        KeyRange{qk[i].n_kv, scale, s.softcap, avx512, sinks}, group,
        stats != nullptr ? stats + ((a + i) * s.n_heads + h0) * kAttnStatFields : nullptr);
  for (int64_t c0 = lo; c0 < hi; c0 += chunk) {
    const int64_t c1 = std::min(hi, c0 + chunk);
    const GroupRows v =
        chunk_rows(*kv.v_pool, v_off.data() + (c0 - lo), c1 - c0, d, f32, f32_off.data());
    // token i's values of keys x0 .. x1 - 1, its chain going on past keys before x0
    const auto values_of = [&](int64_t i, int64_t x0, int64_t x1) {
      if (x0 >= x1) return;
      const GroupRows rows{v.k, v.v, v.k_off, v.v_off + (x0 - c0), v.k_type, v.v_type};
      attend_rows_values(score_of(i, x0), qk[i].n_kv, rows, x1 - x0, d, group, output(i),
                         x0 > qk[i].first, avx512);
    };
    for (int64_t i = 0; i < b - a;) {
      // as the scores; each chain still takes its keys in order
      int64_t x0[kMaxPassTokens], x1[kMaxPassTokens], both0 = 0, both1 = 0;
      if (nt_values > 1 && shared_keys(i, nt_values, c0, c1, x0, x1, both0, both1)) {
        const float* as[kMaxPassTokens];
        float* os[kMaxPassTokens];
        int64_t ld[kMaxPassTokens];
        bool more[kMaxPassTokens];
        for (int64_t t = 0; t < nt_values; ++t) {
          values_of(i + t, x0[t], both0);
          as[t] = score_of(i + t, both0);
          os[t] = output(i + t);
          ld[t] = qk[i + t].n_kv;
          more[t] = both0 > qk[i + t].first;
        }
        const GroupRows rows{v.k, v.v, v.k_off, v.v_off + (both0 - c0), v.k_type, v.v_type};
        attend_rows_values_tokens(nt_values, as, ld, rows, both1 - both0, d, group, os, more);
        for (int64_t t = 0; t < nt_values; ++t) values_of(i + t, both1, x1[t]);
        i += nt_values;
        continue;
      }
      if (in_chunk(i, c0, c1, x0[0], x1[0])) values_of(i, x0[0], x1[0]);
      ++i;
    }
  }
}

}  // namespace

int64_t attention_tile_tokens(int64_t n_tokens, int64_t n_kv_heads, int n_threads,
                              int64_t group_heads, int64_t max_keys) {
  const int64_t want_tiles = (kTasksPerThread * std::max(n_threads, 1) + n_kv_heads - 1) /
                             std::max<int64_t>(n_kv_heads, 1);
  const int64_t score_bytes =
      std::max<int64_t>(group_heads, 1) * std::max<int64_t>(max_keys, 1) * int64_t{sizeof(float)};
  const int64_t fit = std::max<int64_t>(kMaxTileScoreBytes / score_bytes, 1);
  return std::clamp<int64_t>(n_tokens / std::max<int64_t>(want_tiles, 1), 1,
                             std::min(kMaxTile, fit));
}

void attend_tile_fast(const Buffer& q, const PagedKv& kv, int64_t t0, int64_t n, int64_t g,
                      const AttentionShape& s, Buffer& out, std::vector<float>& scores,
                      float* stats, bool avx512) {
  thread_local std::vector<QueryKeys> qk;
  qk.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) qk[static_cast<size_t>(i)] = query_keys(kv, t0 + i, s);
  for (int64_t a = 0; a < n;) {
    // the run of tokens a .. b - 1 of one sequence, its windows' union lo .. hi - 1
    int64_t lo = qk[static_cast<size_t>(a)].first, hi = lo + qk[static_cast<size_t>(a)].n_kv;
    int64_t keys = hi - lo, b = a + 1;
    for (; b < n && qk[static_cast<size_t>(b)].row == qk[static_cast<size_t>(a)].row; ++b) {
      const QueryKeys& k = qk[static_cast<size_t>(b)];
      lo = std::min(lo, k.first);
      hi = std::max(hi, k.first + k.n_kv);
      keys += k.n_kv;
    }
    if (b - a > 1 && hi - lo < keys) {
      attend_run(q, kv, t0 + a, t0 + b, qk.data() + a, lo, hi, g, s, out, scores, stats, avx512);
    } else {  // one token, or windows too far apart to share rows: each as decode runs it
      for (int64_t t = t0 + a; t < t0 + b; ++t)
        attend_group_fast(q, kv, t, g, s, out, scores,
                          stats != nullptr ? stats + t * s.n_heads * kAttnStatFields : nullptr,
                          avx512);
    }
    a = b;
  }
}

}  // namespace llmctl::cpu
