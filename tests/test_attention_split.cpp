// Attention split over keys and dimensions (backend/cpu/attention_split.h): every token's
// output and statistics have the bits of attend_group_fast at 1, 2 and 3 threads, for every
// K/V pool type and mix, GQA groups of 1 to 5 heads, head dims of 20 to 256 (scalar tails,
// 8-lane tails, slices that are not a power of two), windows, soft-caps and sinks, key counts
// that span several chunks of keys and end inside one, decode batches of tokens from two
// sequences; and the fast backend takes this path for a decode with few KV groups and gives
// the same bits.
#include <catch2/catch.hpp>
#include <random>
#include <vector>

#include "backend/cpu/attention_fast.h"
#include "backend/cpu/attention_split.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_fast_backend.h"
#include "backend/cpu/thread_pool.h"
#include "support/backend_buffers.h"
#include "support/paged_cache.h"
#include "support/random_data.h"

using namespace llmctl;
using llmctl::test::Cache;
using llmctl::test::make;
using llmctl::test::make_cache;
using llmctl::test::PoolTypes;
using llmctl::test::random_floats;
using llmctl::test::read;
using llmctl::test::same_bits;
using llmctl::test::Shape;

namespace {

// The K/V types a head dim allows (block types need whole blocks of 32).
std::vector<PoolTypes> pool_types(int64_t head_dim) {
  if (head_dim % 32 == 0) return llmctl::test::kPoolTypes;
  return {{BufferType::F16, BufferType::F16}, {BufferType::F32, BufferType::F16}};
}

// The decode batches: one token deep in sequence 0 (1,100 keys: two whole chunks of 512 and a
// part), and three tokens of both sequences.
struct Batch {
  const char* what;
  std::vector<int32_t> rows, positions;
};
const std::vector<Batch> kBatches = {{"one token at 1099", {0}, {1099}},
                                     {"three tokens, two sequences", {1, 0, 1}, {700, 1199, 3}}};

}  // namespace

TEST_CASE("attend_split: every token's bits and stats as attend_group_fast gives them", "[cpu]") {
  if (!cpu::attention_fast_available()) {
    WARN("no AVX2+FMA+F16C: the fast attention kernel does not run on this CPU");
    return;
  }
  cpu::CpuBackend be;  // buffers only
  std::mt19937 rng(7);
  const std::vector<float> sink_logits = {0.5f, -1.0f, 2.0f, 0.0f, 1.5f, -0.5f};
  cpu::ThreadPool pools[] = {cpu::ThreadPool(1), cpu::ThreadPool(2), cpu::ThreadPool(3)};
  for (const Shape sh : {Shape{9, 3, 64}, Shape{4, 1, 256}, Shape{10, 2, 96}, Shape{5, 5, 32},
                         Shape{6, 2, 20}, Shape{3, 1, 40}})
    for (const PoolTypes t : pool_types(sh.head_dim))
      for (const int32_t window : {0, 600})
        for (const Batch& batch : kBatches) {
          AttentionShape s{sh.n_heads, sh.n_kv_heads, sh.head_dim};
          s.window = window;
          if (window > 0 && sh.head_dim == 64) s.softcap = 30.0f;
          if (window > 0 && sh.n_heads == 6)
            s.sinks = WeightView{"sinks", GgmlType::F32, 6, 1, sink_logits.data()};
          INFO("heads " << sh.n_heads << "/" << sh.n_kv_heads << " head_dim " << sh.head_dim << " "
                        << llmctl::test::name(t) << " window " << window << " " << batch.what);
          const auto n_tok = static_cast<int64_t>(batch.positions.size());
          const int64_t n_out = n_tok * sh.n_heads * sh.head_dim;
          const int64_t n_stats = n_tok * sh.n_heads * kAttnStatFields;
          const Cache c = make_cache(be, rng, 1200, sh.n_kv_heads * sh.head_dim, t, batch.rows,
                                     batch.positions);
          const Buffer q = make(be, random_floats(rng, static_cast<size_t>(n_out)));
          const llmctl::test::GroupResults ref =
              llmctl::test::attend_every_group(be, q, c.kv(), n_tok, s);
          const Buffer& want = ref.out;
          const std::vector<float>& want_stats = ref.stats;
          for (cpu::ThreadPool& pool : pools)
            for (const bool avx512 : {true, false}) {
              INFO(pool.size() << " threads" << (avx512 ? " avx512" : " avx2"));
              cpu::SplitAttentionScratch scratch;
              Buffer got = be.alloc(n_out);
              std::vector<float> got_stats(static_cast<size_t>(n_stats));
              cpu::attend_split(q, c.kv(), n_tok, s, got, got_stats.data(), avx512, pool, scratch);
              CHECK(same_bits(read(be, got), read(be, want)));
              CHECK(same_bits(got_stats, want_stats));
              Buffer plain = be.alloc(n_out);  // without statistics: the same output
              cpu::attend_split(q, c.kv(), n_tok, s, plain, nullptr, avx512, pool, scratch);
              CHECK(same_bits(read(be, plain), read(be, want)));
            }
        }
}

TEST_CASE("attention_split_pays: few (token, group) tasks that do not share out evenly",
          "[cpu]") {
  const AttentionShape smollm2{9, 3, 64}, gemma3{4, 1, 256}, llama1b{32, 8, 64};
  CHECK(cpu::attention_split_pays(1, smollm2, 2));    // 3 groups on 2 threads: 2 against 1
  CHECK(cpu::attention_split_pays(1, gemma3, 2));     // 1 group: one thread idle
  CHECK_FALSE(cpu::attention_split_pays(1, llama1b, 2));  // 8 groups: 4 each
  CHECK_FALSE(cpu::attention_split_pays(2, smollm2, 2));  // 6 tasks: 3 each
  CHECK(cpu::attention_split_pays(1, llama1b, 3));    // 8 on 3 threads: 3, 3, 2
  CHECK_FALSE(cpu::attention_split_pays(4, smollm2, 2));  // 12 tasks: enough to share
  CHECK_FALSE(cpu::attention_split_pays(1, gemma3, 1));   // one thread: nothing to split
}

TEST_CASE("fast backend decode with few KV groups: the split's bits and stats, any thread count",
          "[cpu]") {
  if (!cpu::attention_fast_available()) {
    WARN("no AVX2+FMA+F16C: the fast attention kernel does not run on this CPU");
    return;
  }
  // 9 heads x 2,000 keys is past the backend's parallel threshold: the 2- and 3-thread
  // backends split (3 groups), the 1-thread one runs (token, group) tasks.
  const AttentionShape s{9, 3, 64};
  const std::vector<int32_t> rows = {0}, positions = {1999};
  std::vector<float> first, first_stats;
  for (const int n_threads : {1, 2, 3}) {
    INFO(n_threads << " threads");
    cpu::CpuFastBackend be(n_threads);
    std::mt19937 rng(11);
    const Cache c = make_cache(be, rng, 2000, 3 * 64, PoolTypes{BufferType::F16, BufferType::F16},
                               rows, positions);
    const Buffer q = make(be, random_floats(rng, 9 * 64));
    Buffer out = be.alloc(9 * 64), stats = be.alloc(9 * kAttnStatFields);
    be.attention_with_stats(q, c.kv(), 1, s, out, stats);
    Buffer plain = be.alloc(9 * 64);
    be.attention(q, c.kv(), 1, s, plain);
    CHECK(same_bits(read(be, plain), read(be, out)));
    if (first.empty()) {
      first = read(be, out);
      first_stats = read(be, stats);
      continue;
    }
    CHECK(same_bits(read(be, out), first));
    CHECK(same_bits(read(be, stats), first_stats));
  }
}
