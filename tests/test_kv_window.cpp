// Sliding-window layers in the paged KV cache (model/kv_cache.h): windowed groups release the
// blocks their window has left, so memory stays bounded, and nothing changes in the logits:
//   * a long generation on a tiny gemma3 (window 8, blocks of 4) holds at most a window's worth
//     of windowed blocks, and its logits are bit-identical to the cache without layer groups
//     (every layer keeps every position), on the reference and the fast CPU path;
//   * prefix sharing through windowed groups gives the logits of no sharing, also when the
//     windowed copies a prefix needs have been evicted (fewer positions are reused);
//   * the bookkeeping: released entries, quotas that refuse what the windowed pool cannot
//     promise, and sizes;
//   * kvplan's llmctl rule gives exactly what the cache allocates for the same config.
#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_fast_backend.h"
#include "core/error.h"
#include "core/sliding_window.h"
#include "model/arch.h"
#include "model/config.h"
#include "model/forward.h"
#include "model/generate.h"
#include "model/kv_cache.h"
#include "model/scheduler.h"
#include "model/weights.h"
#include "plan/memory_plan.h"
#include "cli/kvplan_model.h"
#include "plan/model_config.h"
#include "support/test_data.h"
#include "support/tiny_gemma3.h"

using namespace llmctl;

namespace {

std::unique_ptr<Backend> cpu_backend(bool fast) {
  if (fast) return std::make_unique<cpu::CpuFastBackend>(2);
  return std::make_unique<cpu::CpuBackend>();
}

int32_t argmax(const float* row, int32_t n) {
  int32_t best = 0;
  for (int32_t i = 1; i < n; ++i)
    if (row[i] > row[best]) best = i;
  return best;
}

struct LongRun {
  std::vector<std::vector<float>> logits;  // every step's row
  std::vector<int64_t> window_held;        // windowed-group blocks held after each step
  int64_t window_blocks = 0;               // the windowed pool
  uint64_t bytes = 0;
};

// A 20-token prompt in chunks of 5 (one decode, split by max_batch_tokens), then 70 greedy
// steps, one sequence of 96 reserved up front as the scheduler does.
LongRun long_generation(bool fast, bool window_groups) {
  const GgufFile f = test::build_tiny_gemma3({});
  const ModelConfig c = config_from_gguf(f);
  const ModelWeights w = bind_weights(f, c);
  const std::unique_ptr<Backend> be = cpu_backend(fast);
  ForwardOptions fo;
  fo.max_batch_tokens = 5;
  fo.kv.block_size = 4;
  fo.kv.n_blocks = 24;
  fo.kv.type = KvType::F16;
  fo.kv.max_sequences = 1;
  fo.kv.window_groups = window_groups;
  Forward fwd(c, w, *be, fo);
  PagedKvCache& cache = fwd.cache();
  LongRun out;
  out.bytes = cache.bytes();
  out.window_blocks = cache.n_groups() > 1 ? cache.n_blocks(1) : 0;
  const int32_t seq = fwd.add_sequence(96);
  REQUIRE(fwd.reserve(seq, 90) == Reserve::Ok);
  std::vector<BatchToken> batch;
  for (const int32_t t : test::tiny_gemma3_prompt(20)) batch.push_back(BatchToken{seq, t, false});
  batch.back().logits = true;
  int32_t next = 0;
  for (int step = 0; step <= 70; ++step) {
    const std::vector<float>& row = fwd.decode(batch);
    out.logits.push_back(row);
    if (cache.n_groups() > 1) out.window_held.push_back(cache.n_blocks(1) - cache.n_free_blocks(1));
    next = argmax(row.data(), fwd.n_vocab());
    batch = {BatchToken{seq, next, true}};
  }
  return out;
}

}  // namespace

TEST_CASE("kv window: a long generation holds a window of blocks, logits as without groups",
          "[cpu]") {
  for (const bool fast : {false, true}) {
    INFO((fast ? "fast CPU path" : "CPU reference"));
    const LongRun grouped = long_generation(fast, true);
    const LongRun full = long_generation(fast, false);
    REQUIRE(grouped.logits.size() == full.logits.size());
    for (size_t i = 0; i < full.logits.size(); ++i) {
      INFO("step " << i);
      CHECK(grouped.logits[i] == full.logits[i]);  // bit-identical
    }
    // Window 8, blocks of 4, chunks of 5: ceil((8 + 5 - 2) / 4) + 1 = 4 blocks for 5 layers,
    // where the full group holds all 24 (90 positions) for each of its layers.
    CHECK(grouped.window_blocks == 4);
    CHECK(grouped.window_blocks == window_blocks_per_sequence(8, 4, 5, 96));
    CHECK(grouped.bytes == 2ull * (1 * 24 + 5 * 4) * 4 * 32 * 2);
    CHECK(full.bytes == 2ull * 6 * 24 * 4 * 32 * 2);
    // After the window fills, the held count only alternates with the block alignment:
    // positions L - 7 .. L - 1 touch 2 or 3 blocks of 4.
    for (size_t i = 4; i < grouped.window_held.size(); ++i) {
      INFO("step " << i);
      CHECK(grouped.window_held[i] >= 2);
      CHECK(grouped.window_held[i] <= 3);
    }
  }
}

TEST_CASE("kv window: prefix sharing through windowed layers gives the logits of no sharing",
          "[cpu]") {
  const GgufFile f = test::build_tiny_gemma3({});
  const ModelConfig c = config_from_gguf(f);
  const ModelWeights w = bind_weights(f, c);
  const std::vector<int32_t> common = test::tiny_gemma3_prompt(40);
  std::vector<int32_t> other = common;  // the same 34 tokens, then another tail
  for (size_t i = 34; i < other.size(); ++i) other[i] = (other[i] + 7) % 100;
  std::vector<int32_t> unrelated = test::tiny_gemma3_prompt(60);
  for (int32_t& t : unrelated) t = (t + 13) % 100;

  struct Result {
    std::vector<uint64_t> hashes;  // every pick's logits
    int64_t reused = 0;
  };
  // Runs `prompts` one after another (each 12 new tokens) in one Forward; the last one's result.
  const auto run = [&](const std::vector<std::vector<int32_t>>& prompts, bool reuse,
                       int64_t window_pool) {
    cpu::CpuBackend be;
    ForwardOptions fo;
    fo.max_batch_tokens = 8;
    fo.kv.block_size = 4;
    fo.kv.n_blocks = 64;
    fo.kv.max_sequences = window_pool;  // windowed pool: window_pool sequences' worth
    Forward fwd(c, w, be, fo);
    Result r;
    for (const std::vector<int32_t>& p : prompts) {
      r = Result{};
      GenerateOptions o;
      o.n_predict = 12;
      o.n_ctx = 64;
      o.ignore_eos = true;
      o.reuse_prefix = reuse;
      o.on_pick_logits = [&r](const float* row, int32_t n) {
        r.hashes.push_back(fnv1a_64(row, static_cast<size_t>(n)));
      };
      r.reused = generate(fwd, p, o).n_reused;
    }
    CHECK(fwd.cache().n_free_blocks(0) == 64);  // every sequence gave its blocks back
    return r;
  };
  const Result alone = run({other}, false, 2);
  REQUIRE(alone.hashes.size() == 12);
  // The windowed copies of `common`'s blocks are still cached: 32 positions reused (8 blocks of
  // 4 of the 34 common tokens), the window's last 7 positions from the windowed copies.
  const Result shared = run({common, other}, true, 2);
  CHECK(shared.reused == 32);
  CHECK(shared.hashes == alone.hashes);
  // With a windowed pool of one sequence's worth (5 blocks), `common`'s own later blocks and
  // then an unrelated prompt evict the windowed copies while the full blocks stay cached:
  // attach_prefix must not reuse a prefix whose window it cannot restore.
  const Result evicted = run({common, unrelated, other}, true, 1);
  CHECK(evicted.reused < 32);
  CHECK(evicted.hashes == alone.hashes);
}

TEST_CASE("kv window: sequences batched together give their logits alone", "[cpu]") {
  // Continuous batching (scheduler.h) over a windowed pool sized for the 3 sequences: chunks
  // of several sequences map and release their windowed blocks side by side.
  const GgufFile f = test::build_tiny_gemma3({});
  const ModelConfig c = config_from_gguf(f);
  const ModelWeights w = bind_weights(f, c);
  std::vector<std::vector<int32_t>> prompts;
  for (const size_t n : {size_t{30}, size_t{45}, size_t{20}}) {
    prompts.push_back(test::tiny_gemma3_prompt(n));
    for (int32_t& t : prompts.back()) t = (t + static_cast<int32_t>(n)) % 100;
  }
  const auto run = [&](const std::vector<size_t>& which, int64_t parallel) {
    cpu::CpuFastBackend be(2);
    ForwardOptions fo;
    fo.max_batch_tokens = 16;
    fo.kv.block_size = 4;
    fo.kv.n_blocks = 3 * 20;
    fo.kv.max_sequences = 3;
    Forward fwd(c, w, be, fo);
    std::vector<std::vector<uint64_t>> hashes(prompts.size());
    Scheduler sched(fwd, SchedulerOptions{parallel});
    for (const size_t i : which) {
      GenerateOptions o;
      o.n_predict = 25;
      o.n_ctx = 80;
      o.ignore_eos = true;
      o.on_pick_logits = [&hashes, i](const float* row, int32_t n) {
        hashes[i].push_back(fnv1a_64(row, static_cast<size_t>(n)));
      };
      sched.submit(prompts[i], o);
    }
    sched.run(nullptr);
    CHECK(fwd.cache().n_free_blocks(1) == fwd.cache().n_blocks(1));
    return hashes;
  };
  const auto together = run({0, 1, 2}, 3);
  for (size_t i = 0; i < prompts.size(); ++i) {
    INFO("request " << i);
    const auto alone = run({i}, 1);
    REQUIRE(alone[i].size() == 25);
    CHECK(together[i] == alone[i]);
  }
}

TEST_CASE("kv window: released entries, quotas and sizes of a windowed group", "[cpu]") {
  cpu::CpuBackend be;
  KvCacheOptions o;
  o.block_size = 4;
  o.n_blocks = 8;  // 2 sequences of 16 positions
  o.type = KvType::F32;
  o.max_sequences = 2;
  o.max_chunk = 4;
  // Layer 0 windowed (4 positions), layer 1 global.
  PagedKvCache c(be, std::vector<int32_t>{4, 0}, 2, o);
  REQUIRE(c.n_groups() == 2);
  CHECK(c.layer_group(0) == 1);
  CHECK(c.layer_group(1) == 0);
  // Positions 4 + 4 - 1 = 7 live at once touch ceil(6 / 4) + 1 = 3 blocks; 2 sequences.
  CHECK(c.n_blocks(1) == 6);
  CHECK(c.bytes() == 2ull * (8 + 6) * 4 * 2 * 4);
  CHECK(c.bytes() == PagedKvCache::required_bytes(std::vector<int32_t>{4, 0}, 2, o));

  const int32_t a = c.add_sequence(16);
  REQUIRE(c.reserve(a, 16) == Reserve::Ok);
  CHECK(c.block_table(a, 1) == std::vector<int32_t>(4, PagedKvCache::kNoBlock));  // not mapped
  CHECK_THROWS_WITH(c.slot(a, 0, 1), Catch::Contains("has no block in the window-4 layers"));
  const std::vector<int32_t> toks{1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  for (int64_t i = 0; i < 10; i += 2) {
    c.map_positions(a, 2);
    CHECK_NOTHROW(c.slot(a, i + 1, 1));
    c.commit(a, toks.data() + i, 2);
  }
  // Length 10: the next query (position 10) sees 7 .. 10, so block 0 (positions 0 .. 3) is gone.
  CHECK(c.block_table(a, 1)[0] == PagedKvCache::kNoBlock);
  CHECK(c.block_table(a, 1)[1] != PagedKvCache::kNoBlock);
  CHECK(c.n_free_blocks(1) == 6 - 2);
  CHECK_THROWS_WITH(c.map_positions(a, 5), Catch::Contains("at most 4 at a time"));
  // Quotas: b (8 positions) may hold 2 windowed blocks, d (16) 3; 2 + 3 <= 6.
  const int32_t b = c.add_sequence(16);
  REQUIRE(c.reserve(b, 8) == Reserve::Ok);
  c.remove_sequence(a);
  CHECK(c.n_free_blocks(1) == 6);  // a's blocks are back (cached ones count as free)
  const int32_t d = c.add_sequence(16);
  REQUIRE(c.reserve(d, 16) == Reserve::Ok);
  const int32_t e = c.add_sequence(16);
  CHECK(c.reserve(e, 16) == Reserve::PoolFull);  // the full group: 6 + 4 > 8
  c.remove_sequence(b);
  CHECK(c.reserve(e, 16) == Reserve::Ok);  // 8 full blocks, quotas 3 + 3
  CHECK(c.n_free_blocks(0) == 0);
}

TEST_CASE("kv window: the windowed pool bounds admission where the full pool would not", "[cpu]") {
  cpu::CpuBackend be;
  KvCacheOptions o;
  o.block_size = 4;
  o.n_blocks = 16;
  o.type = KvType::F32;
  o.max_sequences = 1;  // windowed pool for one long sequence
  o.max_chunk = 4;
  PagedKvCache c(be, std::vector<int32_t>{8, 0}, 2, o);
  CHECK(c.n_blocks(1) == window_blocks_per_sequence(8, 4, 4, 64));  // 4
  const int32_t a = c.add_sequence(64);
  REQUIRE(c.reserve(a, 32) == Reserve::Ok);  // 8 of 16 full blocks, windowed quota 4
  const int32_t b = c.add_sequence(64);
  CHECK(c.reserve(b, 1) == Reserve::PoolFull);  // no windowed block left to promise
  CHECK(c.capacity(b) == 0);                    // nothing changed
  CHECK(c.n_free_blocks(0) == 8);
}

TEST_CASE("kv window: kvplan's llmctl rule is what the cache allocates", "[cpu][plan]") {
  const GgufFile f = test::build_tiny_gemma3({});
  const ModelConfig c = config_from_gguf(f);
  const plan::ModelConfig m = cli::kvplan_model_from_gguf(f);
  for (int64_t l = 0; l < c.n_layers; ++l) CHECK(m.layer_window(l) == layer_window(c, l));
  for (const int64_t ctx : {5, 100, 1000, 32768})
    for (const int64_t batch : {1, 3})
      for (const int64_t block : {16, 7}) {
        INFO("ctx " << ctx << " batch " << batch << " block " << block);
        plan::PlanInputs in;
        in.model = m;
        in.gpu = plan::find_gpu("h100-sxm");
        in.kv = plan::parse_kv_format("f16");
        in.weight = plan::parse_weight_format("f16");
        in.ctx = ctx;
        in.batch = batch;
        in.block_size = block;
        in.engine = plan::Engine::Llmctl;
        // As `llmctl run -c ctx --parallel batch --block-size block` sets the cache up
        // (run_session.cpp), with its default -b 512.
        KvCacheOptions o;
        o.block_size = block;
        o.n_blocks = (ctx + block - 1) / block * batch;
        o.max_sequences = batch;
        o.max_chunk = std::min<int64_t>(512, ctx * batch);
        o.type = KvType::F16;
        const uint64_t cache = PagedKvCache::required_bytes(layer_windows(c), c.kv_dim(), o);
        CHECK(plan::plan_memory(in, false).kv_bytes_needed == cache);
      }
}

TEST_CASE("kv window: the real Gemma 3 270M at 32k, llmctl and llama.cpp rules", "[cpu][plan]") {
  const std::string path = test::require_fetched_model("gemma-3-270m-q4_k_m.gguf");
  const GgufFile f = GgufFile::open(path);
  const ModelConfig c = config_from_gguf(f);
  const plan::ModelConfig m = cli::kvplan_model_from_gguf(f);
  REQUIRE(c.n_layers == 18);
  REQUIRE(c.sliding_window == 512);
  int64_t windowed = 0;
  for (int64_t l = 0; l < m.n_layers; ++l) windowed += m.layer_window(l) > 0;
  CHECK(windowed == 15);
  plan::PlanInputs in;
  in.model = m;
  in.gpu = plan::find_gpu("h100-sxm");
  in.kv = plan::parse_kv_format("f16");
  in.weight = plan::parse_weight_format("gguf");
  in.ctx = 32768;
  const uint64_t per_cell = 2 * 1 * 256 * 2;  // K and V, 1 KV head of 256, f16
  // llama.cpp's iSWA cache, as its log says: 3 x 32768 cells + 15 x 1024 (pad256(512 + 512)).
  in.engine = plan::Engine::Llamacpp;
  CHECK(plan::plan_memory(in, false).kv_bytes_needed == (3 * 32768 + 15 * 1024) * per_cell);
  // llmctl: what the cache allocates for one sequence of 32768 in blocks of 16, -b 512.
  in.engine = plan::Engine::Llmctl;
  KvCacheOptions o;
  o.n_blocks = 32768 / 16;
  o.max_sequences = 1;
  const uint64_t cache = PagedKvCache::required_bytes(layer_windows(c), c.kv_dim(), o);
  CHECK(cache == (3 * 32768 + 15 * 65 * 16) * per_cell);  // ceil(1022 / 16) + 1 = 65 blocks
  CHECK(plan::plan_memory(in, false).kv_bytes_needed == cache);
}
