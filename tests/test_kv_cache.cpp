// The paged KV cache's bookkeeping (model/kv_cache.h): block tables, reservation limits,
// reference-counted prefix sharing and LRU eviction of cached blocks.
#include <catch2/catch.hpp>
#include <numeric>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "model/kv_cache.h"

using namespace llmctl;

namespace {

KvCacheOptions opts(int64_t n_blocks, int64_t block_size = 4) {
  KvCacheOptions o;
  o.n_blocks = n_blocks;
  o.block_size = block_size;
  o.type = KvType::F16;
  return o;
}

std::vector<int32_t> iota(int32_t n, int32_t first = 0) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), first);
  return v;
}

// Reserve, "write", and commit tokens the way the forward pass does.
void append(PagedKvCache& c, int32_t seq, const std::vector<int32_t>& toks) {
  REQUIRE(c.reserve(seq, static_cast<int64_t>(toks.size())) == Reserve::Ok);
  c.commit(seq, toks.data(), static_cast<int64_t>(toks.size()));
}

}  // namespace

TEST_CASE("kv cache: slots follow the block table, pools are sized and typed", "[cpu]") {
  cpu::CpuBackend be;
  PagedKvCache c(be, 2, 8, opts(4));
  CHECK(c.bytes() == 2ULL * 2 * 4 * 4 * 8 * 2);  // layers x (K, V) x blocks x size x kv_dim x f16
  CHECK(c.keys(1).type() == BufferType::F16);
  const int32_t s = c.add_sequence(100);
  append(c, s, iota(6));
  CHECK(c.length(s) == 6);
  CHECK(c.capacity(s) == 8);
  CHECK(c.block_table(s) == std::vector<int32_t>{0, 1});
  CHECK(c.slot(s, 5) == 1 * 4 + 1);
  CHECK_THROWS_WITH(c.slot(s, 8), Catch::Contains("position 8 of sequence 0 has no slot"));
  CHECK(c.n_free_blocks() == 2);
}

TEST_CASE("kv cache: reserve refuses past max_len and past the pool, changing nothing", "[cpu]") {
  cpu::CpuBackend be;
  PagedKvCache c(be, 1, 8, opts(3));
  const int32_t a = c.add_sequence(10);
  CHECK(c.reserve(a, 11) == Reserve::ContextFull);
  CHECK(c.reserve(a, 10) == Reserve::Ok);  // 3 blocks
  const int32_t b = c.add_sequence(10);
  CHECK(c.reserve(b, 1) == Reserve::PoolFull);
  CHECK(c.capacity(b) == 0);
  c.remove_sequence(a);
  CHECK(c.reserve(b, 1) == Reserve::Ok);
  CHECK_THROWS_AS(c.length(a), Error);  // removed
}

TEST_CASE("kv cache: identical prompt prefixes share full blocks, reference counted", "[cpu]") {
  cpu::CpuBackend be;
  PagedKvCache c(be, 1, 8, opts(8));
  const std::vector<int32_t> prompt = iota(10, 100);  // blocks [100..103] [104..107] + 2
  const int32_t a = c.add_sequence(64);
  CHECK(c.attach_prefix(a, prompt) == 0);  // nothing cached yet
  append(c, a, prompt);

  const int32_t b = c.add_sequence(64);
  CHECK(c.attach_prefix(b, prompt) == 8);  // two full blocks reused
  CHECK(c.block_table(b) ==
        std::vector<int32_t>(c.block_table(a).begin(), c.block_table(a).begin() + 2));
  CHECK(c.length(b) == 8);
  append(c, b, {108, 109});
  CHECK(c.block_table(b)[2] != c.block_table(a)[2]);  // the partial block is private

  // A prompt that differs inside the second block shares the first only.
  std::vector<int32_t> other = prompt;
  other[5] = 7;
  const int32_t d = c.add_sequence(64);
  CHECK(c.attach_prefix(d, other) == 4);
  // At most n - 1 positions: the last token is always computed.
  const int32_t e = c.add_sequence(64);
  CHECK(c.attach_prefix(e, iota(8, 100)) == 4);
  CHECK(c.n_reused_positions() == 8 + 4 + 4);

  // The shared blocks outlive their first owner.
  const std::vector<int32_t> shared(c.block_table(a).begin(), c.block_table(a).begin() + 2);
  c.remove_sequence(a);
  CHECK(std::vector<int32_t>(c.block_table(b).begin(), c.block_table(b).begin() + 2) == shared);
}

TEST_CASE("kv cache: released full blocks stay cached until the pool needs them (LRU)", "[cpu]") {
  cpu::CpuBackend be;
  PagedKvCache c(be, 1, 8, opts(4));
  const int32_t a = c.add_sequence(64);
  append(c, a, iota(9));  // 3 blocks, 2 full
  c.remove_sequence(a);
  CHECK(c.n_free_blocks() == 4);
  const int32_t b = c.add_sequence(64);
  CHECK(c.attach_prefix(b, iota(9)) == 8);  // found after its owner left
  c.remove_sequence(b);
  // Fill the whole pool with other tokens: the cached blocks are evicted, oldest first ...
  const int32_t d = c.add_sequence(64);
  append(c, d, iota(16, 500));
  c.remove_sequence(d);
  // ... so the old prefix is gone (an exact match is required, never a stale one).
  const int32_t e = c.add_sequence(64);
  CHECK(c.attach_prefix(e, iota(9)) == 0);
  CHECK(c.attach_prefix(c.add_sequence(64), iota(17, 500)) == 16);
}

TEST_CASE("kv cache: bad sizes and misuse are errors", "[cpu]") {
  cpu::CpuBackend be;
  CHECK_THROWS_WITH(PagedKvCache(be, 1, 8, opts(0)), "KV cache: 0 blocks, expected at least 1");
  CHECK_THROWS_WITH(PagedKvCache(be, 1, 8, opts(2, 0)),
                    "KV cache: block size 0 is outside [1, 65536]");
  PagedKvCache c(be, 1, 8, opts(2));
  CHECK_THROWS_WITH(c.add_sequence(0), "KV cache: sequence length 0 must be >= 1");
  const int32_t a = c.add_sequence(8);
  const std::vector<int32_t> t = {1, 2};
  CHECK_THROWS_WITH(c.commit(a, t.data(), 2), Catch::Contains("past sequence 0's capacity 0"));
  append(c, a, t);
  CHECK_THROWS_WITH(c.attach_prefix(a, t), Catch::Contains("not empty"));
  CHECK(kv_type_from_name("f16") == KvType::F16);
  CHECK(kv_type_from_name("q8_0") == KvType::Q8_0);
  CHECK(!kv_type_from_name("q5_1"));
}
