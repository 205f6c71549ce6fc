// Prefill attention over a quantized KV cache, a tile of query tokens at a time
// (attention_prefill_tile.h).
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

// One pool's rows for a run of tokens: decoded into `f32` when the pool is of a block type
// (then rows j at f32 + f32_off[j]), else where they lie (pool base + off[j]).
struct PoolRows {
  const uint8_t* base;
  const size_t* off;
  BufferType type;
};

PoolRows gather(const Buffer& pool, const PagedKv& kv, const int32_t* blocks, int64_t lo,
                int64_t n_keys, int64_t kv_dim, int64_t g, int64_t d, std::vector<size_t>& off,
                std::vector<float>& f32, const std::vector<size_t>& f32_off) {
  const BufferType t = pool.type();
  kv_row_offsets(kv, blocks, lo, n_keys, kv_dim, g, d, t, off);
  const auto* base = static_cast<const uint8_t*>(pool.raw());
  if (!buffer_type_is_block(t)) return PoolRows{base, off.data(), t};
  LLMCTL_ASSERT(d % 32 == 0);
  const auto need = static_cast<size_t>(n_keys * d);
  if (f32.size() < need) f32.resize(need);  // grows only: no zero-fill per call
  if (t == BufferType::Q8_0)
    decode_rows<BufferType::Q8_0>(base, off.data(), n_keys, d, f32.data());
  else
    decode_rows<BufferType::Q4_0>(base, off.data(), n_keys, d, f32.data());
  return PoolRows{reinterpret_cast<const uint8_t*>(f32.data()), f32_off.data(), BufferType::F32};
}

// Tokens a .. b - 1, all of block-table row `row`, whose windows lie in key positions lo .. hi
// - 1; qk[i] is token a + i's keys.
void attend_run(const Buffer& q, const PagedKv& kv, int64_t a, int64_t b, const QueryKeys* qk,
                int64_t lo, int64_t hi, int64_t g, const AttentionShape& s, Buffer& out,
                std::vector<float>& scores, float* stats, bool avx512) {
  const int64_t d = s.head_dim, kv_dim = s.n_kv_heads * d, group = s.n_heads / s.n_kv_heads;
  const int64_t h0 = g * group, n_keys = hi - lo;
  const int32_t* blocks = kv.block_table->i32() + int64_t{qk[0].row} * kv.max_blocks;
  // per thread, reused across calls (never allocated per query): the pools' row offsets, the
  // decoded K and V rows (n_keys x d floats each), and the decoded rows' offsets
  thread_local std::vector<size_t> k_off, v_off, f32_off;
  thread_local std::vector<float> k_f32, v_f32;
  thread_local int64_t f32_row = 0;  // the d f32_off was made for
  if (f32_row != d) f32_off.clear(), f32_row = d;
  for (auto j = static_cast<int64_t>(f32_off.size()); j < n_keys; ++j)
    f32_off.push_back(static_cast<size_t>(j * d) * sizeof(float));
  const PoolRows k = gather(*kv.k_pool, kv, blocks, lo, n_keys, kv_dim, g, d, k_off, k_f32, f32_off);
  const PoolRows v = gather(*kv.v_pool, kv, blocks, lo, n_keys, kv_dim, g, d, v_off, v_f32, f32_off);
  const float scale = attention_scale(s);
  const float* sinks = s.sinks.present() ? static_cast<const float*>(s.sinks.data) + h0 : nullptr;
  for (int64_t t = a; t < b; ++t) {
    const QueryKeys& keys = qk[t - a];
    const auto skip = static_cast<size_t>(keys.first - lo);
    const GroupRows rows{k.base, v.base, k.off + skip, v.off + skip, k.type, v.type};
    const int64_t at = (t * s.n_heads + h0) * d;
    attend_rows_fast(q.data() + at, rows, KeyRange{keys.n_kv, scale, s.softcap, avx512, sinks}, d,
                     group, out.data() + at, scores,
                     stats != nullptr ? stats + (t * s.n_heads + h0) * kAttnStatFields : nullptr);
  }
}

}  // namespace

bool attention_tile_pays(const PagedKv& kv) {
  return buffer_type_is_block(kv.k_pool->type()) || buffer_type_is_block(kv.v_pool->type());
}

int64_t attention_tile_tokens(int64_t n_tokens, int64_t n_kv_heads, int n_threads) {
  const int64_t want_tiles =
      (kTasksPerThread * std::max(n_threads, 1) + n_kv_heads - 1) / std::max<int64_t>(n_kv_heads, 1);
  return std::clamp<int64_t>(n_tokens / std::max<int64_t>(want_tiles, 1), 1, kMaxTile);
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
