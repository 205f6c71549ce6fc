// The fast CPU attention kernel (backend/cpu/attention_fast.h): a whole KV group at once
// (attend_group_fast) gives every head the bits attend_head_fast gives it alone, statistics
// included, for group sizes that fill 1, 2, 3 and 4 of the kernel's register lanes and
// chunks of them, head dims with and without an 8-lane tail, odd and even key counts, f32 and
// f16 pools; and the fast backend agrees with the scalar reference on the same shapes.
#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/attention_fast.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_fast_backend.h"
#include "support/backend_buffers.h"
#include "support/random_data.h"

using namespace llmctl;
using llmctl::test::make;
using llmctl::test::make_ids;
using llmctl::test::random_floats;

namespace {

// n_pos positions of one sequence in blocks of 4, the blocks in reverse order in the pool.
struct Cache {
  Buffer k_pool, v_pool, table, seq_rows, pos;
  int64_t max_blocks = 0;
  PagedKv kv() const { return PagedKv{&k_pool, &v_pool, 4, &table, max_blocks, &seq_rows, &pos}; }
};

Cache make_cache(Backend& be, std::mt19937& rng, int64_t n_pos, int64_t kv_dim, BufferType type,
                 const std::vector<int32_t>& positions) {
  Cache c;
  c.max_blocks = (n_pos + 3) / 4;
  c.k_pool = be.alloc(c.max_blocks * 4 * kv_dim, type);
  c.v_pool = be.alloc(c.max_blocks * 4 * kv_dim, type);
  std::vector<int32_t> blocks, slots;
  for (int64_t b = 0; b < c.max_blocks; ++b)
    blocks.push_back(static_cast<int32_t>(c.max_blocks - 1 - b));
  for (int64_t j = 0; j < n_pos; ++j)
    slots.push_back(blocks[static_cast<size_t>(j / 4)] * 4 + static_cast<int32_t>(j % 4));
  const Buffer k = make(be, random_floats(rng, static_cast<size_t>(n_pos * kv_dim)));
  const Buffer v = make(be, random_floats(rng, static_cast<size_t>(n_pos * kv_dim)));
  be.kv_store(k, v, make_ids(be, slots), n_pos, kv_dim, c.k_pool, c.v_pool);
  c.table = make_ids(be, blocks);
  c.seq_rows = make_ids(be, std::vector<int32_t>(positions.size(), 0));
  c.pos = make_ids(be, positions);
  return c;
}

bool same_bits(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * 4) == 0; }

}  // namespace

TEST_CASE("attend_group_fast: every head bit-identical to attend_head_fast, stats too", "[cpu]") {
  if (!cpu::attention_fast_available()) {
    WARN("no AVX2+FMA+F16C: the fast attention kernel does not run on this CPU");
    return;
  }
  std::mt19937 rng(77);
  cpu::CpuBackend be;  // buffers only
  struct Heads {
    int64_t n_heads, n_kv_heads;
  };
  for (const Heads hs :
       {Heads{3, 3}, Heads{4, 2}, Heads{6, 2}, Heads{8, 2}, Heads{10, 2}, Heads{16, 2}}) {
    for (const int64_t d : {int64_t{3}, int64_t{12}, int64_t{40}, int64_t{64}}) {
      for (const BufferType type : {BufferType::F32, BufferType::F16}) {
        INFO("heads " << hs.n_heads << "/" << hs.n_kv_heads << " head_dim " << d << " "
                      << buffer_type_name(type));
        const AttentionShape s{hs.n_heads, hs.n_kv_heads, d};
        const std::vector<int32_t> positions = {0, 1, 6, 10};  // 1, 2, 7 and 11 keys
        const Cache c = make_cache(be, rng, 11, hs.n_kv_heads * d, type, positions);
        const int64_t n_tok = static_cast<int64_t>(positions.size());
        const Buffer q =
            make(be, random_floats(rng, static_cast<size_t>(n_tok * hs.n_heads * d)));
        const int64_t n_out = n_tok * hs.n_heads * d;
        Buffer by_head = be.alloc(n_out), by_group = be.alloc(n_out);
        std::vector<float> st_head(static_cast<size_t>(n_tok * hs.n_heads * kAttnStatFields));
        std::vector<float> st_group(st_head.size(), -1.0f);
        std::vector<float> scores;
        for (int64_t t = 0; t < n_tok; ++t) {
          for (int64_t h = 0; h < hs.n_heads; ++h)
            cpu::attend_head_fast(q, c.kv(), t, h, s, by_head, scores,
                                  st_head.data() + (t * hs.n_heads + h) * kAttnStatFields);
          for (int64_t g = 0; g < hs.n_kv_heads; ++g)
            cpu::attend_group_fast(q, c.kv(), t, g, s, by_group, scores,
                                   st_group.data() + t * hs.n_heads * kAttnStatFields);
        }
        CHECK(same_bits(by_head.data(), by_group.data(), static_cast<size_t>(n_out)));
        CHECK(same_bits(st_head.data(), st_group.data(), st_head.size()));
      }
    }
  }
}

// The AVX-512 loops keep the AVX2 loops' bits (attention_fast.h): head dims with 64-, 16- and
// 8-lane tails and a scalar tail, key counts 1 to 21 (4-key steps and their rest), 1 to 4
// heads per group and chunks of them, f32 and f16 pools.
TEST_CASE("attend_group_fast: the AVX-512 loops give the AVX2 loops' bits", "[cpu]") {
  if (!cpu::attention_fast_has_avx512()) {
    WARN("skipped: no AVX-512 (F, DQ) on this CPU");
    return;
  }
  std::mt19937 rng(78);
  cpu::CpuBackend be;  // buffers only
  for (const int64_t group : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{4}, int64_t{6}}) {
    for (const int64_t d : {int64_t{3}, int64_t{24}, int64_t{40}, int64_t{64}, int64_t{100},
                            int64_t{256}}) {
      for (const BufferType type : {BufferType::F32, BufferType::F16}) {
        INFO("group " << group << " head_dim " << d << " " << buffer_type_name(type));
        const AttentionShape s{2 * group, 2, d};
        std::vector<int32_t> positions;
        for (int32_t p = 0; p <= 20; ++p) positions.push_back(p);
        const Cache c = make_cache(be, rng, 21, 2 * d, type, positions);
        const int64_t n_tok = static_cast<int64_t>(positions.size());
        const Buffer q = make(be, random_floats(rng, static_cast<size_t>(n_tok * s.n_heads * d)));
        const int64_t n_out = n_tok * s.n_heads * d;
        Buffer wide = be.alloc(n_out), narrow = be.alloc(n_out);
        std::vector<float> scores;
        for (int64_t t = 0; t < n_tok; ++t)
          for (int64_t g = 0; g < 2; ++g) {
            cpu::attend_group_fast(q, c.kv(), t, g, s, wide, scores, nullptr, true);
            cpu::attend_group_fast(q, c.kv(), t, g, s, narrow, scores, nullptr, false);
          }
        CHECK(same_bits(wide.data(), narrow.data(), static_cast<size_t>(n_out)));
      }
    }
  }
}

TEST_CASE("fast attention backend agrees with the reference for GQA groups of 1 to 8", "[cpu]") {
  cpu::CpuBackend ref;
  cpu::CpuFastBackend fast(2);
  for (const int64_t n_heads : {int64_t{2}, int64_t{6}, int64_t{16}}) {
    const AttentionShape s{n_heads, 2, 40};
    const std::vector<int32_t> positions = {4, 9, 10};
    std::vector<float> got[2];
    int i = 0;
    for (Backend* be : std::initializer_list<Backend*>{&ref, &fast}) {
      std::mt19937 same(79);  // the same cache and queries on both backends
      const Cache c = make_cache(*be, same, 11, 2 * 40, BufferType::F16, positions);
      const Buffer q = make(*be, random_floats(same, static_cast<size_t>(3 * n_heads * 40)));
      Buffer out = be->alloc(3 * n_heads * 40);
      be->attention(q, c.kv(), 3, s, out);
      got[i].resize(static_cast<size_t>(out.size()));
      be->download(out, got[i].data(), out.size());
      ++i;
    }
    INFO("n_heads " << n_heads);
    for (size_t j = 0; j < got[0].size(); ++j) CHECK(got[1][j] == Approx(got[0][j]).margin(1e-5));
  }
}
