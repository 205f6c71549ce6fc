// Continuous batching on stories260K (model/scheduler.h): several prompts decoded together
// give exactly the tokens each gives alone (acceptance 16 of the engine issue), prefix
// sharing changes no token, and the KV pool's limits are respected.
#include <catch2/catch.hpp>
#include <map>
#include <memory>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_fast_backend.h"
#include "core/error.h"
#include "io/gguf.h"
#include "model/forward.h"
#include "model/scheduler.h"
#include "support/test_data.h"

using namespace llmctl;

namespace {

struct Model {
  GgufFile file;
  ModelConfig config;
  ModelWeights weights;
  explicit Model(const std::string& path)
      : file(GgufFile::open(path)),
        config(config_from_gguf(file)),
        weights(bind_weights(file, config)) {}
};

// Prompts of different lengths, two sharing a 20-token prefix (more than one block of 16).
std::vector<std::vector<int32_t>> prompts() {
  std::vector<int32_t> common = {1};
  for (int32_t i = 0; i < 19; ++i) common.push_back(300 + (i * 7) % 150);
  std::vector<int32_t> a = common, b = common;
  a.insert(a.end(), {403, 407});
  b.insert(b.end(), {261, 378, 290});
  return {{1, 403, 407, 261, 378}, a, {1, 300}, b, {1, 410, 411, 412, 413, 414, 415, 416, 417}};
}

GenerateOptions greedy(int64_t n_predict) {
  GenerateOptions o;
  o.n_ctx = 96;
  o.n_predict = n_predict;
  o.ignore_eos = true;
  return o;
}

std::map<size_t, GenerateResult> run_all(Forward& fwd, int64_t parallel, bool reuse) {
  Scheduler s(fwd, SchedulerOptions{parallel});
  const auto ps = prompts();
  for (size_t i = 0; i < ps.size(); ++i) {
    GenerateOptions o = greedy(static_cast<int64_t>(10 + 7 * i));
    o.reuse_prefix = reuse;
    s.submit(ps[i], o);
  }
  std::map<size_t, GenerateResult> out;
  s.run([&](size_t k, GenerateResult&& r) { out[k] = std::move(r); });
  return out;
}

}  // namespace

TEST_CASE("batched greedy generation gives the tokens of separate runs", "[cpu][golden]") {
  Model m(llmctl::test::require_test_file("models/stories260K.gguf"));
  cpu::CpuBackend ref;
  cpu::CpuFastBackend fast(2);
  for (Backend* be : std::initializer_list<Backend*>{&ref, &fast}) {
    INFO("backend threads " << be->n_threads());
    ForwardOptions fo;
    fo.max_batch_tokens = 7;  // prompts are split into chunks, mixed with decode tokens
    fo.kv.n_blocks = 5 * 6;
    fo.kv.block_size = 16;
    Forward fwd(m.config, m.weights, *be, fo);
    // Separate: one request at a time, no sharing.
    std::map<size_t, GenerateResult> alone;
    const auto ps = prompts();
    for (size_t i = 0; i < ps.size(); ++i) {
      GenerateOptions o = greedy(static_cast<int64_t>(10 + 7 * i));
      o.reuse_prefix = false;
      alone[i] = generate(fwd, ps[i], o);
    }
    for (int64_t parallel : {int64_t{2}, int64_t{5}}) {
      for (bool reuse : {false, true}) {
        INFO("parallel " << parallel << " reuse " << reuse);
        const auto together = run_all(fwd, parallel, reuse);
        REQUIRE(together.size() == ps.size());
        for (size_t i = 0; i < ps.size(); ++i) {
          CHECK(together.at(i).generated_ids == alone.at(i).generated_ids);
          CHECK(together.at(i).last_logits_hash == alone.at(i).last_logits_hash);
          CHECK(together.at(i).generated_ids.size() == 10 + 7 * i);
        }
      }
    }
    // With reuse, the second prompt of the shared pair found the first's block (16 positions);
    // by now earlier runs have cached every prompt's full blocks.
    const auto again = run_all(fwd, 5, true);
    CHECK(again.at(3).n_reused == 16);
    CHECK(fwd.cache().n_free_blocks() == fo.kv.n_blocks);  // everything was given back
  }
}

TEST_CASE("scheduler admits what fits and refuses a request the pool cannot hold", "[cpu]") {
  Model m(llmctl::test::require_test_file("models/stories260K.gguf"));
  cpu::CpuBackend be;
  ForwardOptions fo;
  fo.kv.n_blocks = 4;  // 64 positions in all
  fo.kv.block_size = 16;
  Forward fwd(m.config, m.weights, be, fo);
  {
    // Each needs 2 blocks (5 + 20 positions): two run at a time, the third waits its turn.
    Scheduler s(fwd, SchedulerOptions{3});
    for (int i = 0; i < 3; ++i) s.submit({1, 403, 407, 261, 378}, greedy(20));
    int done = 0;
    s.run([&](size_t, GenerateResult&& r) {
      CHECK(r.generated_ids.size() == 20);
      ++done;
    });
    CHECK(done == 3);
  }
  Scheduler s(fwd, SchedulerOptions{1});
  GenerateOptions big = greedy(-1);  // reserves its whole n_ctx of 96 positions: 6 blocks
  s.submit({1, 403}, big);
  CHECK_THROWS_WITH(s.run(nullptr), Catch::Contains("more than the KV pool can hold"));
  CHECK_THROWS_WITH(s.submit({}, greedy(1)), Catch::Contains("the prompt has no tokens"));
}
