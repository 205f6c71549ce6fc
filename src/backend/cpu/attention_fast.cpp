// Vectorized paged attention for one (token, head) (attention_fast.h).
#include "backend/cpu/attention_fast.h"

#include <algorithm>
#include <type_traits>

#include "backend/cpu/attention_key_loops.h"
#include "backend/cpu/attention_kv_load.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/softcap_fast.h"
#include "backend/cpu/softmax_fast.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/fp16.h"

namespace llmctl::cpu {

// Walked block by block once per (token, group), so the loops below do no division per key.
void kv_row_offsets(const PagedKv& kv, const int32_t* blocks, int64_t first, int64_t n_kv,
                    int64_t kv_dim, int64_t g, int64_t d, BufferType type, std::vector<size_t>& off) {
  off.resize(static_cast<size_t>(n_kv));
  kv_row_offsets(kv, blocks, first, n_kv, kv_dim, g, d, type, off.data());
}

void kv_row_offsets(const PagedKv& kv, const int32_t* blocks, int64_t first, int64_t n_kv,
                    int64_t kv_dim, int64_t g, int64_t d, BufferType type, size_t* off) {
  const int64_t n_blocks = kv.k_pool->size() / (kv_dim * kv.block_size);
  // A row and a head start on whole blocks of the pool's type (check_kv_types_head_dim), so
  // pool_offset(row * kv_dim + g * d) = row * row_bytes + head_bytes: the type's block size
  // is looked up once, not per key (it was 8 % of a decode step at 4k positions).
  const int64_t per_block = buffer_block_elems(type);
  LLMCTL_ASSERT(kv_dim % per_block == 0 && (g * d) % per_block == 0);
  const auto row_bytes = static_cast<size_t>(kv_load::pool_offset(type, kv_dim));
  const auto head_bytes = static_cast<size_t>(kv_load::pool_offset(type, g * d));
  const int64_t end = first + n_kv;
  for (int64_t j = first; j < end;) {
    const int32_t b = blocks[j / kv.block_size];
    LLMCTL_ASSERT(b >= 0 && b < n_blocks);
    const int64_t in_block = j % kv.block_size;
    const int64_t n = std::min<int64_t>(kv.block_size - in_block, end - j);
    const size_t row0 = static_cast<size_t>(int64_t{b} * kv.block_size + in_block);
    size_t* o = off + (j - first);
    for (int64_t i = 0; i < n; ++i) o[i] = (row0 + static_cast<size_t>(i)) * row_bytes + head_bytes;
    j += n;
  }
}

namespace {

using namespace attn_loops;

// The loops are inlined into the dispatch below: the AVX-512 diagnostics stay off (see
// attention_key_loops.h) until its end.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

// Up to 4 heads of one query token and their keys, for the score and value loops: K rows at
// kbase + koff[j] in a pool of type kt, V rows at vbase + voff[j] in a pool of type vt; head
// h's scores at scores + h * ld; `more`: the values add to out's chains (values_slice).
struct HeadChunk {
  const float* q;
  const uint8_t *kbase, *vbase;
  const size_t *koff, *voff;
  BufferType kt, vt;
  int64_t d;
  int64_t n_kv;
  float scale;
  float* scores;
  float* out;
  int64_t ld;
  bool more;
  int64_t c0, c1;  // the values loops' dimensions: c0 .. c1 - 1 (0 .. d for a whole head)
};

template <BufferType T, size_t HN>
LLMCTL_ATTN_AVX2 void chunk_scores_of(const HeadChunk& c, bool avx512) {
  if (avx512)
    group_scores_avx512<T, HN>(c.q, c.kbase, c.koff, c.d, c.n_kv, c.scale, c.scores, c.ld);
  else
    group_scores<T, HN>(c.q, c.kbase, c.koff, c.d, 0, c.n_kv, c.scale, c.scores, c.ld);
}

template <BufferType T, size_t HN>
LLMCTL_ATTN_AVX2 void chunk_values_of(const HeadChunk& c, bool avx512) {
  if (avx512)
    group_values_avx512<T, HN>(c.scores, c.vbase, c.voff, c.d, c.n_kv, c.out, c.ld, c.more, c.c0,
                               c.c1);
  else
    group_values<T, HN>(c.scores, c.vbase, c.voff, c.d, c.n_kv, c.out, c.ld, c.more, c.c0, c.c1);
}

// f(type constant) for a pool type: the loops are compiled once per type.
template <typename F>
LLMCTL_ATTN_AVX2 void with_pool_type(BufferType t, F&& f) {
  switch (t) {
    case BufferType::F16:
      f(std::integral_constant<BufferType, BufferType::F16>{});
      break;
    case BufferType::Q8_0:
      f(std::integral_constant<BufferType, BufferType::Q8_0>{});
      break;
    case BufferType::Q4_0:
      f(std::integral_constant<BufferType, BufferType::Q4_0>{});
      break;
    default:
      f(std::integral_constant<BufferType, BufferType::F32>{});
      break;
  }
}

template <size_t HN>
LLMCTL_ATTN_AVX2 void chunk_scores(const HeadChunk& c, bool avx512) {
  with_pool_type(c.kt, [&](auto t) { chunk_scores_of<decltype(t)::value, HN>(c, avx512); });
}

template <size_t HN>
LLMCTL_ATTN_AVX2 void chunk_values(const HeadChunk& c, bool avx512) {
  with_pool_type(c.vt, [&](auto t) { chunk_values_of<decltype(t)::value, HN>(c, avx512); });
}

inline HeadChunk head_chunk(const GroupRows& r, const float* q, int64_t d, int64_t n_kv,
                            float scale, float* scores, float* out, int64_t ld, bool more) {
  return HeadChunk{q,   r.k,    r.v,    r.k_off, r.v_off, r.k_type, r.v_type, d, n_kv,
                   scale, scores, out, ld, more, 0, d};
}

// f(head count constant) for a chunk of hn = 1 .. 4 heads.
template <typename F>
LLMCTL_ATTN_AVX2 void with_heads(int64_t hn, F&& f) {
  switch (hn) {
    case 1:
      f(std::integral_constant<size_t, 1>{});
      break;
    case 2:
      f(std::integral_constant<size_t, 2>{});
      break;
    case 3:
      f(std::integral_constant<size_t, 3>{});
      break;
    default:
      f(std::integral_constant<size_t, 4>{});
      break;
  }
}

#pragma GCC diagnostic pop

}  // namespace

// The heads' loops are inlined from here on, so the AVX-512 diagnostics stay off (see above).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

// Heads go in chunks of up to 4: 2 keys x 4 heads (scores) and 4 heads x 32 dims (values) of
// accumulators fit the 16 registers (AVX2; AVX-512: 4 keys, 64 dims).
LLMCTL_ATTN_AVX2 void attend_rows_fast(const float* q, const GroupRows& rows, const KeyRange& keys,
                                       int64_t d, int64_t nh, float* out,
                                       std::vector<float>& scores, float* stats) {
  const int64_t n_kv = keys.n_kv;
  scores.resize(static_cast<size_t>(nh * n_kv));
  const bool wide = attention_fast_has_avx512() && keys.avx512;
  for (int64_t h0 = 0; h0 < nh; h0 += 4) {  // a chunk's scores, softmax, values: in cache
    const int64_t hn = std::min<int64_t>(4, nh - h0);
    const HeadChunk c = head_chunk(rows, q + h0 * d, d, n_kv, keys.scale,
                                   scores.data() + h0 * n_kv, out + h0 * d, n_kv, false);
    with_heads(hn, [&](auto n) { chunk_scores<decltype(n)::value>(c, wide); });
    KeyRange chunk_keys = keys;
    if (keys.sinks != nullptr) chunk_keys.sinks = keys.sinks + h0;
    attend_rows_softmax(c.scores, chunk_keys, hn,
                        stats != nullptr ? stats + h0 * kAttnStatFields : nullptr);
    with_heads(hn, [&](auto n) { chunk_values<decltype(n)::value>(c, wide); });
  }
}

LLMCTL_ATTN_AVX2 void attend_rows_scores(const float* q, const GroupRows& rows, int64_t n,
                                         float scale, int64_t d, int64_t nh, float* scores,
                                         int64_t ld, bool avx512) {
  const bool wide = attention_fast_has_avx512() && avx512;
  for (int64_t h0 = 0; h0 < nh; h0 += 4) {
    const HeadChunk c =
        head_chunk(rows, q + h0 * d, d, n, scale, scores + h0 * ld, nullptr, ld, false);
    with_heads(std::min<int64_t>(4, nh - h0),
               [&](auto hn) { chunk_scores<decltype(hn)::value>(c, wide); });
  }
}

int64_t attend_tokens_per_pass(int64_t nh, bool avx512) {
  if (!(attention_fast_has_avx512() && avx512)) return 1;
  switch (nh) {  // NT x HN <= 6 per call (4 heads: two calls of 2)
    case 1:
    case 2:
    case 4:
      return 3;
    case 3:
      return 2;
    default:
      return 1;
  }
}

namespace {

// f(HN, NT constants) for each call of nt tokens over nh heads (attend_tokens_per_pass), with
// the heads h0 .. h0 + HN - 1 of the call.
template <typename F>
LLMCTL_ATTN_AVX2 void with_token_heads(int64_t nt, int64_t nh, F&& f) {
  using std::integral_constant;
  if (nt == 2 && nh == 3) {
    f(integral_constant<size_t, 3>{}, integral_constant<size_t, 2>{}, int64_t{0});
  } else if (nt == 3 && nh == 1) {
    f(integral_constant<size_t, 1>{}, integral_constant<size_t, 3>{}, int64_t{0});
  } else if (nt == 3 && (nh == 2 || nh == 4)) {
    for (int64_t h0 = 0; h0 < nh; h0 += 2)
      f(integral_constant<size_t, 2>{}, integral_constant<size_t, 3>{}, h0);
  } else {
    LLMCTL_ASSERT(false && "attend_tokens_per_pass gives the token counts");
  }
}

}  // namespace

LLMCTL_ATTN_AVX2 void attend_rows_scores_tokens(int64_t nt, const float* const q[],
                                                const GroupRows& rows, int64_t n, float scale,
                                                int64_t d, int64_t nh, float* const scores[],
                                                const int64_t ld[]) {
  with_token_heads(nt, nh, [&](auto hn, auto tn, int64_t h0) {
    constexpr size_t HN = decltype(hn)::value, NT = decltype(tn)::value;
    const float* qh[NT];
    float* sh[NT];
    for (size_t t = 0; t < NT; ++t) {
      qh[t] = q[t] + h0 * d;
      sh[t] = scores[t] + h0 * ld[t];
    }
    with_pool_type(rows.k_type, [&](auto t) {
      tokens_scores_avx512<decltype(t)::value, HN, NT>(qh, rows.k, rows.k_off, d, n, scale, sh,
                                                       ld);
    });
  });
}

void attend_rows_softmax(float* scores, const KeyRange& keys, int64_t nh, float* stats) {
  const int64_t n_kv = keys.n_kv;
  for (int64_t h = 0; h < nh; ++h) {
    float* sh = scores + h * n_kv;
    float* st = stats != nullptr ? stats + h * kAttnStatFields : nullptr;
    if (st != nullptr) attn_raw_score_stats(sh, n_kv, st);
    if (keys.softcap > 0.0f) softcap_fast(sh, n_kv, keys.softcap);
    if (st != nullptr) attn_score_stats(sh, n_kv, st);
    softmax_fast(sh, n_kv, keys.sinks != nullptr ? keys.sinks + h : nullptr);
    if (st != nullptr) attn_softmax_entropy(sh, n_kv, st);
  }
}

LLMCTL_ATTN_AVX2 void attend_rows_values(const float* a, int64_t ld, const GroupRows& rows,
                                         int64_t n, int64_t d, int64_t nh, float* out, bool more,
                                         bool avx512) {
  const bool wide = attention_fast_has_avx512() && avx512;
  for (int64_t h0 = 0; h0 < nh; h0 += 4) {
    // the weights are only read by the values loops
    const HeadChunk c = head_chunk(rows, nullptr, d, n, 0.0f, const_cast<float*>(a + h0 * ld),
                                   out + h0 * d, ld, more);
    with_heads(std::min<int64_t>(4, nh - h0),
               [&](auto hn) { chunk_values<decltype(hn)::value>(c, wide); });
  }
}

LLMCTL_ATTN_AVX2 void attend_rows_values_tokens(int64_t nt, const float* const a[],
                                                const int64_t ld[], const GroupRows& rows,
                                                int64_t n, int64_t d, int64_t nh,
                                                float* const out[], const bool more[]) {
  LLMCTL_ASSERT(d % 64 == 0);
  with_token_heads(nt, nh, [&](auto hn, auto tn, int64_t h0) {
    constexpr size_t HN = decltype(hn)::value, NT = decltype(tn)::value;
    const float* ah[NT];
    float* oh[NT];
    for (size_t t = 0; t < NT; ++t) {
      ah[t] = a[t] + h0 * ld[t];
      oh[t] = out[t] + h0 * d;
    }
    with_pool_type(rows.v_type, [&](auto t) {
      tokens_values_avx512<decltype(t)::value, HN, NT>(ah, ld, rows.v, rows.v_off, d, n, oh,
                                                       more);
    });
  });
}

LLMCTL_ATTN_AVX2 void attend_rows_values_dims(const float* a, int64_t ld, const GroupRows& rows,
                                              int64_t n, int64_t d, int64_t nh, int64_t c0,
                                              int64_t c1, float* out, bool avx512) {
  LLMCTL_ASSERT(c0 >= 0 && c0 % 8 == 0 && c0 < c1 && c1 <= d && (c1 % 8 == 0 || c1 == d));
  const bool wide = attention_fast_has_avx512() && avx512;
  for (int64_t h0 = 0; h0 < nh; h0 += 4) {
    HeadChunk c = head_chunk(rows, nullptr, d, n, 0.0f, const_cast<float*>(a + h0 * ld),
                             out + h0 * d, ld, false);
    c.c0 = c0;
    c.c1 = c1;
    with_heads(std::min<int64_t>(4, nh - h0),
               [&](auto hn) { chunk_values<decltype(hn)::value>(c, wide); });
  }
}

#pragma GCC diagnostic pop

bool attention_fast_available() {
  const CpuFeatures& f = cpu_features();
  return f.avx2 && f.fma && f.f16c;
}

bool attention_fast_has_avx512() {
  static const bool has = [] {
    const CpuFeatures& f = cpu_features();
    return attention_fast_available() && f.avx512f && f.avx512dq;
  }();
  return has;
}

QueryKeys query_keys(const PagedKv& kv, int64_t t, const AttentionShape& s) {
  const int32_t row = kv.token_seq->i32()[t];
  const int32_t pos = kv.positions->i32()[t];
  LLMCTL_ASSERT(row >= 0 && pos >= 0 && (pos / kv.block_size) < kv.max_blocks);
  LLMCTL_ASSERT((static_cast<int64_t>(row) + 1) * kv.max_blocks <= kv.block_table->size());
  const int64_t first = attention_first_position(pos, s.window);
  return QueryKeys{row, first, int64_t{pos} + 1 - first};
}

namespace {
// Heads h0 .. h0 + nh - 1 (one KV group) of query token t: checks the token's cache row and
// position, walks its rows' offsets, then attend_rows_fast(). stats: the first of those heads'
// rows, or nullptr.
void attend_heads(const Buffer& q, const PagedKv& kv, int64_t t, int64_t h0, int64_t nh,
                  const AttentionShape& s, Buffer& out, std::vector<float>& scores, float* stats,
                  bool avx512) {
  const int64_t group = s.n_heads / s.n_kv_heads;
  const int64_t kv_dim = s.n_kv_heads * s.head_dim, g = h0 / group, d = s.head_dim;
  const QueryKeys qk = query_keys(kv, t, s);
  const int32_t* blocks = kv.block_table->i32() + int64_t{qk.row} * kv.max_blocks;
  const BufferType kt = kv.k_pool->type(), vt = kv.v_pool->type();
  // per thread, reused: no allocation per call; V's only when its type differs from K's
  thread_local std::vector<size_t> k_offsets, v_offsets;
  kv_row_offsets(kv, blocks, qk.first, qk.n_kv, kv_dim, g, d, kt, k_offsets);
  if (vt != kt) kv_row_offsets(kv, blocks, qk.first, qk.n_kv, kv_dim, g, d, vt, v_offsets);
  const GroupRows rows{static_cast<const uint8_t*>(kv.k_pool->raw()),
                       static_cast<const uint8_t*>(kv.v_pool->raw()),
                       k_offsets.data(),
                       vt != kt ? v_offsets.data() : k_offsets.data(),
                       kt,
                       vt};
  const KeyRange keys{qk.n_kv, attention_scale(s), s.softcap, avx512,
                      s.sinks.present() ? static_cast<const float*>(s.sinks.data) + h0 : nullptr};
  attend_rows_fast(q.data() + (t * s.n_heads + h0) * d, rows, keys, d, nh,
                   out.data() + (t * s.n_heads + h0) * d, scores, stats);
}
}  // namespace

void attend_head_fast(const Buffer& q, const PagedKv& kv, int64_t t, int64_t h,
                      const AttentionShape& s, Buffer& out, std::vector<float>& scores,
                      float* stats, bool avx512) {
  attend_heads(q, kv, t, h, 1, s, out, scores, stats, avx512);
}

void attend_group_fast(const Buffer& q, const PagedKv& kv, int64_t t, int64_t g,
                       const AttentionShape& s, Buffer& out, std::vector<float>& scores,
                       float* stats, bool avx512) {
  const int64_t group = s.n_heads / s.n_kv_heads;
  attend_heads(q, kv, t, g * group, group, s, out, scores,
               stats != nullptr ? stats + g * group * kAttnStatFields : nullptr, avx512);
}

}  // namespace llmctl::cpu
