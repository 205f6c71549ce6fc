// Prefill attention a tile of queries at a time (backend/cpu/attention_prefill_tile.h): every
// token's output and statistics have the bits of the untiled kernel (attend_group_fast, which
// decodes each block where it reads it), for Q8_0, Q4_0, F16 and F32 pools, mixed K/V types,
// GQA groups of 1 to 5 heads, head dims of 32 to 256, sliding windows, soft-caps and sinks,
// tiles of 1 to the whole batch including sizes that do not divide the key or token count,
// runs of two sequences inside one tile, and far-apart windows; AVX-512 tiles give AVX2
// tiles' bits; and the fast backend's whole-batch prefill gives each token the bits of that
// token attended alone (the decode path).
#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/attention_fast.h"
#include "backend/cpu/attention_prefill_tile.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_fast_backend.h"
#include "support/backend_buffers.h"
#include "support/paged_cache.h"
#include "support/random_data.h"

using namespace llmctl;
using llmctl::test::make;
using llmctl::test::make_ids;
using llmctl::test::random_floats;
using llmctl::test::read;
using llmctl::test::Cache;
using llmctl::test::kPoolTypes;
using llmctl::test::make_cache;
using llmctl::test::name;
using llmctl::test::PoolTypes;
using llmctl::test::same_bits;
using llmctl::test::Shape;
using llmctl::test::kF16;
using llmctl::test::kF32;
using llmctl::test::kQ4;
using llmctl::test::kQ8;

namespace {

// The batches: prefills of 37 tokens after 5 and after 263 cached ones (sequence 0; the keys
// of the later one span several of the kernel's chunks of keys at every head_dim: 256 keys at
// 32 dims, 128 at 64, 32 at 256), and a mixed batch whose tiles straddle both sequences with
// positions out of order.
struct Batch {
  const char* what;
  std::vector<int32_t> rows, positions;
};
std::vector<Batch> batches() {
  Batch prefill{"prefill of 37 at 5", {}, {}}, deep{"prefill of 37 at 263", {}, {}};
  for (int32_t p = 5; p < 42; ++p) prefill.rows.push_back(0), prefill.positions.push_back(p);
  for (int32_t p = 263; p < 300; ++p) deep.rows.push_back(0), deep.positions.push_back(p);
  Batch mixed{"two sequences, out of order",
              {0, 0, 1, 1, 1, 0, 0, 1, 0, 1, 1},
              {40, 3, 0, 1, 2, 299, 17, 30, 0, 290, 41}};
  return {prefill, deep, mixed};
}

}  // namespace

TEST_CASE("attend_tile_fast: every token's bits and stats as attend_group_fast gives them",
          "[cpu]") {
  if (!cpu::attention_fast_available()) {
    WARN("no AVX2+FMA+F16C: the fast attention kernel does not run on this CPU");
    return;
  }
  cpu::CpuBackend be;  // buffers only
  std::mt19937 rng(2026);
  const std::vector<float> sink_logits = {0.5f,  -1.0f, 2.0f, 0.0f,  1.5f,
                                          -0.5f, 0.25f, 3.0f, -2.0f, 1.0f};
  for (const Shape sh :
       {Shape{2, 2, 32}, Shape{3, 3, 64}, Shape{8, 4, 64}, Shape{6, 2, 64}, Shape{9, 3, 64},
        Shape{4, 1, 256}, Shape{10, 2, 96}})
    for (const PoolTypes t : kPoolTypes)
      for (const int32_t window : {0, 7})
        for (const Batch& batch : batches()) {
          AttentionShape s{sh.n_heads, sh.n_kv_heads, sh.head_dim};
          s.window = window;
          if (window > 0 && sh.head_dim == 64) s.softcap = 30.0f;  // a soft-cap and sinks too
          if (window > 0 && sh.n_heads == 6)
            s.sinks = WeightView{"sinks", GgmlType::F32, 6, 1, sink_logits.data()};
          INFO("heads " << sh.n_heads << "/" << sh.n_kv_heads << " head_dim " << sh.head_dim << " "
                        << name(t) << " window " << window << " " << batch.what);
          const int64_t n_tok = static_cast<int64_t>(batch.positions.size());
          const int64_t n_out = n_tok * sh.n_heads * sh.head_dim;
          const Cache c =
              make_cache(be, rng, 300, sh.n_kv_heads * sh.head_dim, t, batch.rows, batch.positions);
          const Buffer q = make(be, random_floats(rng, static_cast<size_t>(n_out)));
          const int64_t n_stats = n_tok * sh.n_heads * kAttnStatFields;
          const llmctl::test::GroupResults ref =
              llmctl::test::attend_every_group(be, q, c.kv(), n_tok, s);
          const Buffer& want = ref.out;
          const std::vector<float>& want_stats = ref.stats;
          std::vector<float> scores;
          for (const int64_t tile : {int64_t{1}, int64_t{3}, int64_t{5}, int64_t{16}, n_tok})
            for (const bool avx512 : {true, false}) {
              INFO("tile " << tile << (avx512 ? " avx512" : " avx2"));
              Buffer got = be.alloc(n_out);
              std::vector<float> got_stats(static_cast<size_t>(n_stats));
              for (int64_t t0 = 0; t0 < n_tok; t0 += tile)
                for (int64_t g = 0; g < sh.n_kv_heads; ++g)
                  cpu::attend_tile_fast(q, c.kv(), t0, std::min(tile, n_tok - t0), g, s, got,
                                        scores, got_stats.data(), avx512);
              CHECK(same_bits(read(be, got), read(be, want)));
              CHECK(same_bits(got_stats, want_stats));
            }
        }
}

TEST_CASE("attend_tile_fast: far-apart windows of one sequence share no rows, same bits", "[cpu]") {
  if (!cpu::attention_fast_available()) return;
  cpu::CpuBackend be;
  std::mt19937 rng(7);
  AttentionShape s{4, 2, 64};
  s.window = 4;
  const std::vector<int32_t> rows = {0, 0, 0}, positions = {3, 40, 20};
  const Cache c = make_cache(be, rng, 42, 128, PoolTypes{kQ8, kQ4}, rows, positions);
  const Buffer q = make(be, random_floats(rng, 3 * 4 * 64));
  Buffer want = be.alloc(3 * 4 * 64), got = be.alloc(3 * 4 * 64);
  std::vector<float> scores;
  for (int64_t g = 0; g < 2; ++g) {
    for (int64_t tok = 0; tok < 3; ++tok)
      cpu::attend_group_fast(q, c.kv(), tok, g, s, want, scores);
    cpu::attend_tile_fast(q, c.kv(), 0, 3, g, s, got, scores);
  }
  CHECK(same_bits(read(be, got), read(be, want)));
}

TEST_CASE("fast backend prefill over any cache: each token's bits as decoded alone",
          "[cpu]") {
  // 70 tokens: tiles of 16 (and what is left) at 1 and 2 threads, of fewer at 3
  const int64_t n_tok = 70, n_pos = 73;
  for (const Shape sh : {Shape{9, 3, 64}, Shape{4, 1, 256}})
    for (const PoolTypes t : kPoolTypes)
      for (const int32_t window : {0, 9}) {
        AttentionShape s{sh.n_heads, sh.n_kv_heads, sh.head_dim};
        s.window = window;
        const int64_t hd = sh.n_heads * sh.head_dim;
        std::vector<int32_t> rows(static_cast<size_t>(n_tok), 0), positions;
        for (int32_t p = 3; p < n_pos; ++p) positions.push_back(p);
        std::vector<float> first;
        for (const int n_threads : {1, 2, 3}) {
          INFO("heads " << sh.n_heads << "/" << sh.n_kv_heads << " head_dim " << sh.head_dim << " "
                        << name(t) << " window " << window << " threads " << n_threads);
          cpu::CpuFastBackend be(n_threads);
          std::mt19937 rng(99);
          const Cache c =
              make_cache(be, rng, n_pos, sh.n_kv_heads * sh.head_dim, t, rows, positions);
          const std::vector<float> q = random_floats(rng, static_cast<size_t>(n_tok * hd));
          Buffer all = be.alloc(n_tok * hd);
          be.attention(make(be, q), c.kv(), n_tok, s, all);
          const std::vector<float> batched = read(be, all);
          if (first.empty())
            first = batched;
          else
            CHECK(same_bits(batched, first));
          if (n_threads != 2) continue;
          for (int64_t tok = 0; tok < n_tok; ++tok) {  // one token a call: the decode path
            const Buffer row = make_ids(be, {0}),
                         pos = make_ids(be, {positions[static_cast<size_t>(tok)]});
            const PagedKv one{&c.k_pool, &c.v_pool, 4, &c.table, c.max_blocks, &row, &pos};
            const std::vector<float> qt(q.begin() + tok * hd, q.begin() + (tok + 1) * hd);
            Buffer out = be.alloc(hd);
            be.attention(make(be, qt), one, 1, s, out);
            const std::vector<float> alone = read(be, out);
            CHECK(same_bits(alone, std::vector<float>(batched.begin() + tok * hd,
                                                      batched.begin() + (tok + 1) * hd)));
          }
        }
      }
}

TEST_CASE("attention_tile_tokens: up to 16, at least 4 tasks a thread, 1 for one token", "[cpu]") {
  CHECK(cpu::attention_tile_tokens(512, 3, 2) == 16);
  CHECK(cpu::attention_tile_tokens(512, 1, 2) == 16);
  CHECK(cpu::attention_tile_tokens(16, 1, 2) == 2);  // 8 tiles = 4 a thread
  CHECK(cpu::attention_tile_tokens(1, 8, 16) == 1);
  CHECK(cpu::attention_tile_tokens(7, 1, 1) == 1);
}

TEST_CASE("attention_tile_tokens: a tile's scores stay within 4 MiB a thread", "[cpu]") {
  // 1B shape (8 groups of 4 heads), 512 tokens on 2 threads: 16 up to 16k keys, then halving
  CHECK(cpu::attention_tile_tokens(512, 8, 2, 4, 4096) == 16);
  CHECK(cpu::attention_tile_tokens(512, 8, 2, 4, 16384) == 16);
  CHECK(cpu::attention_tile_tokens(512, 8, 2, 4, 32768) == 8);
  CHECK(cpu::attention_tile_tokens(512, 8, 2, 4, 131072) == 2);
  CHECK(cpu::attention_tile_tokens(512, 8, 2, 4, 1 << 20) == 1);  // 16 MiB for one token: untiled
  for (const int64_t keys : {int64_t{100}, int64_t{5000}, int64_t{40000}, int64_t{300000}}) {
    const int64_t tile = cpu::attention_tile_tokens(512, 8, 2, 4, keys);
    CHECK((tile == 1 || tile * 4 * keys * 4 <= (int64_t{4} << 20)));
  }
}
