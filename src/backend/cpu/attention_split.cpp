// Attention of a few query tokens split evenly over the threads (attention_split.h).
#include "backend/cpu/attention_split.h"

#include <algorithm>

namespace llmctl::cpu {

namespace {

// Keys per scores task: enough that a task's work dwarfs its hand-off (3 heads x 512 keys x
// 64 dimensions is about 100k FMAs), few enough that 2 or 3 threads get even shares of 4k keys.
constexpr int64_t kKeysPerTask = 512;
// Dimensions per values slice at least: 32 f16 values are one 64-byte line of a V row, so no
// two threads read the same line; and 2 zmm of 16 lanes per head keep the FMA chains apart.
constexpr int64_t kMinSliceDims = 32;
// Values slices wanted per thread, so that the static split is even.
constexpr int64_t kSlicesPerThread = 2;

}  // namespace

bool attention_split_pays(int64_t n_tokens, const AttentionShape& s, int n_threads) {
  const int64_t tasks = n_tokens * s.n_kv_heads;
  return n_threads > 1 && tasks < 4 * int64_t{n_threads} && tasks % n_threads != 0;
}

void attend_split(const Buffer& q, const PagedKv& kv, int64_t n_tokens, const AttentionShape& s,
                  Buffer& out, float* stats, bool avx512, ThreadPool& pool,
                  SplitAttentionScratch& scratch) {
  const int64_t group = s.n_heads / s.n_kv_heads, d = s.head_dim;
  const int64_t kv_dim = s.n_kv_heads * d;
  const BufferType kt = kv.k_pool->type(), vt = kv.v_pool->type();
  const auto* kbase = static_cast<const uint8_t*>(kv.k_pool->raw());
  const auto* vbase = static_cast<const uint8_t*>(kv.v_pool->raw());
  const float scale = attention_scale(s);
  const float* sinks = s.sinks.present() ? static_cast<const float*>(s.sinks.data) : nullptr;

  // Each token's keys (checked against the cache) and its place in the scratch; the chunks.
  using TokenKeys = SplitAttentionScratch::Token;
  using KeyChunk = SplitAttentionScratch::KeyChunk;
  std::vector<TokenKeys>& tokens = scratch.tokens;
  std::vector<KeyChunk>& chunks = scratch.chunks;
  tokens.resize(static_cast<size_t>(n_tokens));
  chunks.clear();
  int64_t n_scores = 0, n_offsets = 0;
  for (int64_t t = 0; t < n_tokens; ++t) {
    const QueryKeys qk = query_keys(kv, t, s);
    tokens[static_cast<size_t>(t)] = TokenKeys{qk, n_scores, n_offsets};
    n_scores += s.n_heads * qk.n_kv;
    n_offsets += s.n_kv_heads * qk.n_kv;
    for (int64_t g = 0; g < s.n_kv_heads; ++g)
      for (int64_t j = 0; j < qk.n_kv; j += kKeysPerTask)
        chunks.push_back(KeyChunk{t, g, j, std::min(qk.n_kv, j + kKeysPerTask)});
  }
  scratch.scores.resize(static_cast<size_t>(n_scores));
  scratch.k_off.resize(static_cast<size_t>(n_offsets));
  if (vt != kt) scratch.v_off.resize(static_cast<size_t>(n_offsets));

  // The K and V rows of token t's group g, key 0 first.
  auto group_rows = [&](const TokenKeys& tk, int64_t g) {
    const int64_t o = tk.offsets + g * tk.keys.n_kv;
    const size_t* k_off = scratch.k_off.data() + o;
    return GroupRows{kbase, vbase, k_off, vt != kt ? scratch.v_off.data() + o : k_off, kt, vt};
  };
  auto scores_of = [&](const TokenKeys& tk, int64_t h) {
    return scratch.scores.data() + tk.scores + h * tk.keys.n_kv;
  };

  // 1. scores (and the chunk's row offsets)
  pool.parallel_for(static_cast<int64_t>(chunks.size()), [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      const KeyChunk& c = chunks[static_cast<size_t>(i)];
      const TokenKeys& tk = tokens[static_cast<size_t>(c.t)];
      const int32_t* blocks = kv.block_table->i32() + int64_t{tk.keys.row} * kv.max_blocks;
      const int64_t o = tk.offsets + c.g * tk.keys.n_kv + c.j0, n = c.j1 - c.j0;
      const int64_t first = tk.keys.first + c.j0;
      kv_row_offsets(kv, blocks, first, n, kv_dim, c.g, d, kt, scratch.k_off.data() + o);
      if (vt != kt) kv_row_offsets(kv, blocks, first, n, kv_dim, c.g, d, vt, scratch.v_off.data() + o);
      GroupRows rows = group_rows(tk, c.g);
      rows.k_off += c.j0;
      const int64_t h0 = c.g * group;
      attend_rows_scores(q.data() + (c.t * s.n_heads + h0) * d, rows, n, scale, d, group,
                         scores_of(tk, h0) + c.j0, tk.keys.n_kv, avx512);
    }
  });

  // 2. soft-cap, softmax, statistics: one (token, head) row each
  pool.parallel_for(n_tokens * s.n_heads, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      const int64_t t = i / s.n_heads, h = i % s.n_heads;
      const TokenKeys& tk = tokens[static_cast<size_t>(t)];
      const KeyRange keys{tk.keys.n_kv, scale, s.softcap, avx512,
                          sinks != nullptr ? sinks + h : nullptr};
      attend_rows_softmax(scores_of(tk, h), keys, 1,
                          stats != nullptr ? stats + i * kAttnStatFields : nullptr);
    }
  });

  // 3. values: slices of whole 32-dimension parts (the last one takes the rest)
  const int64_t parts = std::max<int64_t>(1, d / kMinSliceDims);
  const int64_t wanted = kSlicesPerThread * pool.size();
  const int64_t per_group = std::max<int64_t>(
      1, std::min(parts, (wanted + n_tokens * s.n_kv_heads - 1) / (n_tokens * s.n_kv_heads)));
  pool.parallel_for(n_tokens * s.n_kv_heads * per_group, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      const int64_t slice = i % per_group, tg = i / per_group;
      const int64_t t = tg / s.n_kv_heads, g = tg % s.n_kv_heads;
      const TokenKeys& tk = tokens[static_cast<size_t>(t)];
      // slice k of per_group: parts [k * parts / per_group, (k + 1) * parts / per_group)
      const int64_t c0 = slice * parts / per_group * kMinSliceDims;
      const int64_t c1 = slice + 1 == per_group ? d : (slice + 1) * parts / per_group * kMinSliceDims;
      const int64_t h0 = g * group;
      attend_rows_values_dims(scores_of(tk, h0), tk.keys.n_kv, group_rows(tk, g), tk.keys.n_kv, d,
                              group, c0, c1, out.data() + (t * s.n_heads + h0) * d, avx512);
    }
  });
}

}  // namespace llmctl::cpu
