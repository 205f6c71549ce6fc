#pragma once
// Attention of one (query token, head), or of all heads of one KV group, over its sequence's
// pages, vectorized: the fast CPU backend's kernel (the reference is CpuBackend::attend_head).
// A group reads each K and V row once for its heads (GQA). K and V rows are read where
// they lie in the pool, with no per-row copy: f16 converted 8 lanes at a time by F16C, Q8_0 and
// Q4_0 blocks decoded 8 or 16 lanes at a time into the values the reference's dequantization
// gives (attention_kv_load.h). The K and V pools may be of different types (-ctk / -ctv).
//
//   s[j] = q . K[j, g] * scale, j = j0 .. pos;  a = softmax(s);  out = sum_j a[j] V[j, g]
//
// with the AttentionShape options as backend.h defines them: scale = attention_scale(s), j0 the
// window's first position (the rows before it are not read), and with a soft-cap the scores
// capped by softcap_fast (softcap_fast.h) before the softmax and the statistics, and with sinks
// the head's sink logit in its softmax's denominator (softmax_fast's `sink`).
// The result of a (token, head) depends only on its inputs, never on the batch or the thread
// that runs it (batch invariance, backend.h). It differs from the reference by rounding: the
// dot products accumulate in 8 lanes with FMA instead of one running sum, and the softmax's
// exp is computed in 8 lanes (softmax_fast.h).

#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace llmctl::cpu {

// Whether attend_head_fast can run here (AVX2, FMA and F16C).
bool attention_fast_available();
// Whether its AVX-512 loops can (AVX-512 F and DQ besides). They give the AVX2 loops' bits
// (the same per-lane FMA chains, twice as many per instruction), so `avx512` below changes
// the speed only; false runs the AVX2 loops (tests compare the two).
bool attention_fast_has_avx512();

// Query token t, head h of q (n_tokens, n_heads, head_dim) into the same place of out.
// `scores` is scratch (resized to pos + 1). With `stats` non-null, also the (token, head)'s
// kAttnStatFields statistics of these very scores (attn_score_stats and
// attn_softmax_entropy, cpu_backend.h); out does not change.
void attend_head_fast(const Buffer& q, const PagedKv& kv, int64_t t, int64_t h,
                      const AttentionShape& s, Buffer& out, std::vector<float>& scores,
                      float* stats = nullptr, bool avx512 = true);

// All heads of KV group g (heads g * group .. (g + 1) * group - 1, group = n_heads /
// n_kv_heads) of query token t, reading each K and V row once for the group. Every head's
// output and statistics are bit-identical to attend_head_fast's for that head. stats, when
// non-null, points at the token's first head's row (n_heads rows of kAttnStatFields).
void attend_group_fast(const Buffer& q, const PagedKv& kv, int64_t t, int64_t g,
                       const AttentionShape& s, Buffer& out, std::vector<float>& scores,
                       float* stats = nullptr, bool avx512 = true);

// -- the pieces, for kernels that gather the rows themselves (attention_prefill_tile.h) ------

// Where a query token's keys are: row `row` of the block table, key positions first ..
// first + n_kv - 1 (its window). Checks the token's row and position against the cache.
struct QueryKeys {
  int32_t row;
  int64_t first, n_kv;
};
QueryKeys query_keys(const PagedKv& kv, int64_t t, const AttentionShape& s);

// Byte offsets, from the base of a pool of `type`, of KV head g's rows at positions first ..
// first + n_kv - 1 (off[i] is position first + i); `blocks` is the sequence's block-table row.
void kv_row_offsets(const PagedKv& kv, const int32_t* blocks, int64_t first, int64_t n_kv,
                    int64_t kv_dim, int64_t g, int64_t d, BufferType type, std::vector<size_t>& off);
// The same into off[0 .. n_kv - 1] (a part of a longer array, filled by several threads).
void kv_row_offsets(const PagedKv& kv, const int32_t* blocks, int64_t first, int64_t n_kv,
                    int64_t kv_dim, int64_t g, int64_t d, BufferType type, size_t* off);

// The K and V rows of one KV group that a query reads, wherever they lie: key j's K row (j = 0
// .. n_kv - 1, the window's first position first) at k + k_off[j], of type k_type (F32, F16,
// Q8_0 or Q4_0), its V row at v + v_off[j], of type v_type.
struct GroupRows {
  const uint8_t *k, *v;
  const size_t *k_off, *v_off;
  BufferType k_type, v_type;
};

// The scores of a query's n_kv keys scaled by `scale`, then capped when softcap > 0.
struct KeyRange {
  int64_t n_kv;
  float scale, softcap;
  bool avx512;  // the AVX-512 loops where the CPU has them (the same bits either way)
  const float* sinks;  // the first head's sink logit (heads consecutive), or nullptr
};

// Heads 0 .. nh - 1 of one query token and one KV group: q and out rows of consecutive heads
// (stride d), stats nh rows of kAttnStatFields or nullptr. attend_group_fast is this over the
// rows where they lie in the pools; a row holding the very f32 values the pool's loads give
// (attention_kv_load.h) gives the same bits.
void attend_rows_fast(const float* q, const GroupRows& rows, const KeyRange& keys, int64_t d,
                      int64_t nh, float* out, std::vector<float>& scores, float* stats);

// attend_rows_fast in three steps, for a kernel that takes the keys in chunks (each step's
// per-element arithmetic is attend_rows_fast's, so a query gives the same bits):
//   attend_rows_scores  scores + h * ld + j = q_h . K[j] * scale, keys j = 0 .. n - 1 of rows
//   attend_rows_softmax on nh rows of keys.n_kv scores (at stride keys.n_kv): the soft-cap,
//                       softmax with sinks, statistics (nh rows of kAttnStatFields or nullptr)
//   attend_rows_values  out_h (+)= sum_j a[h * ld + j] V[j], keys j = 0 .. n - 1 of rows; with
//                       `more` each output's fma chain goes on from the value out holds (an
//                       earlier chunk's), else it starts from zero
void attend_rows_scores(const float* q, const GroupRows& rows, int64_t n, float scale, int64_t d,
                        int64_t nh, float* scores, int64_t ld, bool avx512);
void attend_rows_softmax(float* scores, const KeyRange& keys, int64_t nh, float* stats);
void attend_rows_values(const float* a, int64_t ld, const GroupRows& rows, int64_t n, int64_t d,
                        int64_t nh, float* out, bool more, bool avx512);
// How many tokens of a group of nh heads attend_rows_scores_tokens and _values_tokens take in
// one pass: 3 for 1, 2 or 4 heads, 2 for 3 heads, with the AVX-512 loops (avx512 and the CPU
// has them); 1 (no such pass) otherwise.
int64_t attend_tokens_per_pass(int64_t nh, bool avx512);
// attend_rows_scores for nt = attend_tokens_per_pass(nh) > 1 queries (consecutive tokens of one
// group: query t's heads at q[t], its scores at scores[t], stride ld[t]) over the same n keys,
// each key row loaded and converted once for all of them (4 heads: once per 2); the same bits
// as nt calls.
void attend_rows_scores_tokens(int64_t nt, const float* const q[], const GroupRows& rows,
                               int64_t n, float scale, int64_t d, int64_t nh,
                               float* const scores[], const int64_t ld[]);
// attend_rows_values for nt = attend_tokens_per_pass(nh) > 1 queries over the same n keys
// (query t: weights a[t] at stride ld[t], out[t], more[t]), each value row loaded once for all
// of them (4 heads: once per 2); d a multiple of 64. The same bits as nt calls.
void attend_rows_values_tokens(int64_t nt, const float* const a[], const int64_t ld[],
                               const GroupRows& rows, int64_t n, int64_t d, int64_t nh,
                               float* const out[], const bool more[]);
// attend_rows_values (without `more`) for dimensions c0 .. c1 - 1 of each head only (c0 a
// multiple of 8, c1 one or d): every output element is the same fma chain over the keys as
// attend_rows_values gives it, so slices of a head's dimensions can run on different threads.
void attend_rows_values_dims(const float* a, int64_t ld, const GroupRows& rows, int64_t n,
                             int64_t d, int64_t nh, int64_t c0, int64_t c1, float* out,
                             bool avx512);

}  // namespace llmctl::cpu
