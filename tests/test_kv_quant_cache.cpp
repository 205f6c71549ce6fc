// The quantized KV cache above the op level (model/kv_cache.h KvType Q8_0 / Q4_0):
//   * the cache allocates what required_bytes() says, by hand: rows of kv_dim / 32 blocks of 34
//     or 18 bytes, K and V each in its own type;
//   * kvplan (plan/memory_plan.h, llmctl rule) prices exactly that, per token and for a whole
//     plan, for f32, f16, q8_0 and q4_0, on a catalog model, SmolLM2 and Gemma 3 270M (windowed
//     layers);
//   * a model whose head_dim is not a multiple of 32 is refused with its head_dim;
//   * on SmolLM2, batched decoding and prefix sharing over a q8_0 (and a K q8_0 + V q4_0) cache
//     give each request the tokens and logits it gets alone.
#include <catch2/catch.hpp>
#include <algorithm>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_fast_backend.h"
#include "cli/kvplan_model.h"
#include "core/error.h"
#include "io/gguf.h"
#include "model/arch.h"
#include "model/config.h"
#include "model/forward.h"
#include "model/generate.h"
#include "model/kv_cache.h"
#include "model/scheduler.h"
#include "model/weights.h"
#include "plan/memory_plan.h"
#include "plan/model_config.h"
#include "support/fixtures.h"
#include "support/test_data.h"
#include "support/tiny_gemma3.h"

using namespace llmctl;

namespace {

constexpr KvType kTypes[] = {KvType::F32, KvType::F16, KvType::Q8_0, KvType::Q4_0};

// The cache `llmctl run -c ctx --parallel batch` sets up (run_session.cpp), default -b 512.
KvCacheOptions run_cache(int64_t ctx, int64_t batch, KvType t, KvType tv) {
  KvCacheOptions o;
  if (tv != t) o.v_type = tv;
  o.n_blocks = (ctx + o.block_size - 1) / o.block_size * batch;
  o.max_sequences = batch;
  o.max_chunk = std::min<int64_t>(512, ctx * batch);
  o.type = t;
  return o;
}

plan::PlanInputs plan_for(const plan::ModelConfig& m, int64_t ctx, int64_t batch, KvType t,
                          KvType tv) {
  plan::PlanInputs in;
  in.model = m;
  in.gpu = plan::find_gpu("h100-sxm");
  in.kv = plan::parse_kv_format(kv_type_name(t));
  if (tv != t) in.kv_v = plan::parse_kv_format(kv_type_name(tv));
  in.weight = plan::parse_weight_format("f16");
  in.ctx = ctx;
  in.batch = batch;
  in.engine = plan::Engine::Llmctl;
  return in;
}

struct Model {
  GgufFile file;
  ModelConfig config;
  ModelWeights weights;
  explicit Model(const std::string& path)
      : file(GgufFile::open(path)), config(config_from_gguf(file)), weights(bind_weights(file, config)) {}
};

// kvplan per token and per plan against what the cache allocates, for every pair of K and V
// types (llama.cpp's -ctk / -ctv), or of those given.
void check_plan_matches_cache(const ModelConfig& c, const plan::ModelConfig& m,
                              const std::vector<KvType>& types = {std::begin(kTypes),
                                                                  std::end(kTypes)}) {
  cpu::CpuBackend be;
  for (const KvType t : types)
    for (const KvType tv : types) {
      INFO("K " << kv_type_name(t) << ", V " << kv_type_name(tv));
      // One block of one position on every layer (no window groups): exactly one token's bytes.
      KvCacheOptions one;
      one.block_size = 1;
      one.n_blocks = 1;
      one.type = t;
      if (tv != t) one.v_type = tv;
      one.window_groups = false;
      const PagedKvCache cache(be, c.n_layers, c.kv_dim(), one);
      CHECK(plan::kv_formula(m, plan::parse_kv_format(kv_type_name(t)),
                             plan::parse_kv_format(kv_type_name(tv)), 1)
                .bytes_per_token == cache.bytes());
      for (const int64_t ctx : {100, 4096})
        for (const int64_t batch : {1, 3}) {
          INFO("ctx " << ctx << " batch " << batch);
          CHECK(plan::plan_memory(plan_for(m, ctx, batch, t, tv), false).kv_bytes_needed ==
                PagedKvCache::required_bytes(layer_windows(c), c.kv_dim(),
                                             run_cache(ctx, batch, t, tv)));
        }
    }
}

}  // namespace

TEST_CASE("quantized KV cache: allocates kv_dim / 32 blocks per row, K and V in their types",
          "[cpu]") {
  cpu::CpuBackend be;
  KvCacheOptions o;
  o.block_size = 16;
  o.n_blocks = 10;
  const int64_t layers = 3, kv_dim = 64, rows = 160;
  const struct {
    KvType k;
    std::optional<KvType> v;
    uint64_t row_bytes;  // K + V bytes of one position
  } cases[] = {{KvType::F32, {}, 2 * 256},       {KvType::F16, {}, 2 * 128},
               {KvType::Q8_0, {}, 2 * 2 * 34},   {KvType::Q4_0, {}, 2 * 2 * 18},
               {KvType::Q8_0, KvType::Q4_0, 68 + 36}, {KvType::F16, KvType::Q8_0, 128 + 68}};
  for (const auto& cs : cases) {
    o.type = cs.k;
    o.v_type = cs.v;
    INFO(kv_types_label(o));
    PagedKvCache c(be, layers, kv_dim, o);
    CHECK(c.bytes() == layers * rows * cs.row_bytes);
    CHECK(PagedKvCache::required_bytes(layers, kv_dim, o) == c.bytes());
    CHECK(c.type() == cs.k);
    CHECK(c.v_type() == cs.v.value_or(cs.k));
    CHECK(c.keys(2).type() == kv_buffer_type(cs.k));
    CHECK(c.values(2).type() == kv_buffer_type(cs.v.value_or(cs.k)));
  }
  o.type = KvType::Q8_0;
  o.v_type.reset();
  CHECK(kv_types_label(o) == "q8_0");
  o.v_type = KvType::F16;
  CHECK(kv_types_label(o) == "K q8_0 + V f16");
  CHECK_THROWS_WITH(PagedKvCache(be, 2, 48, o),
                    "KV cache: q8_0 rows of 48 values are not whole blocks of 32");
  CHECK(kv_type_names() == std::vector<std::string>{"f32", "f16", "q8_0", "q4_0"});
  CHECK(kv_type_from_name("q4_0") == KvType::Q4_0);
  CHECK(!kv_type_from_name("q5_1"));
}

TEST_CASE("quantized KV cache: kvplan prices what the cache allocates (llama-3.1-8b)",
          "[cpu][plan]") {
  const plan::ModelConfig m = plan::find_model("llama-3.1-8b");
  ModelConfig c;
  c.n_layers = m.n_layers;
  c.n_heads = m.n_heads;
  c.n_kv_heads = m.n_kv_heads;
  c.head_dim = m.head_dim;
  REQUIRE(c.kv_dim() == 1024);
  // per token: 32 layers x (K + V) x 1024 dims: f32 4 B, f16 2 B, q8_0 34/32 B, q4_0 18/32 B
  CHECK(plan::kv_formula(m, plan::parse_kv_format("q8_0"), 1).bytes_per_token == 32u * 2 * 32 * 34);
  CHECK(plan::kv_formula(m, plan::parse_kv_format("q4_0"), 1).bytes_per_token == 32u * 2 * 32 * 18);
  check_plan_matches_cache(c, m);
}

TEST_CASE("quantized KV cache: kvplan prices what the cache allocates (SmolLM2, Gemma 3)",
          "[cpu][plan]") {
  for (const std::string& path :
       {test::require_test_file("models/SmolLM2-135M-Instruct.Q4_1.gguf"),
        test::require_fetched_model("gemma-3-270m-q4_k_m.gguf")}) {
    INFO(path);
    const GgufFile f = GgufFile::open(path);
    const ModelConfig c = config_from_gguf(f);
    check_plan_matches_cache(c, cli::kvplan_model_from_gguf(f));
  }
}

TEST_CASE("quantized KV cache: a head_dim that is not a multiple of 32 is refused by name",
          "[cpu]") {
  const GgufFile f = test::build_tiny_gemma3({});  // 4 heads of 16
  const ModelConfig c = config_from_gguf(f);
  const ModelWeights w = bind_weights(f, c);
  cpu::CpuBackend be;
  ForwardOptions fo;
  fo.kv.type = KvType::Q8_0;
  CHECK_THROWS_WITH(Forward(c, w, be, fo),
                    "KV cache type q8_0: the model's head_dim is 16, not a multiple of 32 (a q8_0 "
                    "block holds 32 values of one head)");
  fo.kv.type = KvType::F16;
  fo.kv.v_type = KvType::Q4_0;
  CHECK_THROWS_WITH(Forward(c, w, be, fo), Catch::StartsWith("V cache type q4_0: the model's head_dim is 16"));
  CHECK_THROWS_WITH(Forward(c, w, be, 64, KvType::Q4_0), Catch::StartsWith("KV cache type q4_0"));
}

namespace {

// Prompts of different lengths, two sharing a 20-token prefix (more than one block of 16).
std::vector<std::vector<int32_t>> prompts() {
  std::vector<int32_t> common = {1};
  for (int32_t i = 0; i < 19; ++i) common.push_back(300 + (i * 7) % 150);
  std::vector<int32_t> a = common, b = common;
  a.insert(a.end(), {403, 407});
  b.insert(b.end(), {261, 378, 290});
  return {a, {1, 410, 411, 412}, b};
}

GenerateOptions greedy(size_t i, bool reuse) {
  GenerateOptions o;
  o.n_ctx = 64;
  o.n_predict = static_cast<int64_t>(4 + 3 * i);
  o.ignore_eos = true;
  o.reuse_prefix = reuse;
  return o;
}

}  // namespace

TEST_CASE("quantized KV cache: batched decoding and prefix sharing change no token (SmolLM2)",
          "[cpu][golden]") {
  Model m(test::require_test_file("models/SmolLM2-135M-Instruct.Q4_1.gguf"));
  cpu::CpuFastBackend fast(2);
  for (const auto& [k, v] : {std::pair{KvType::Q8_0, KvType::Q8_0},
                             std::pair{KvType::Q8_0, KvType::Q4_0}}) {
    ForwardOptions fo;
    fo.max_batch_tokens = 7;  // prompts split into chunks, mixed with decode tokens
    fo.kv.n_blocks = 3 * 4;
    fo.kv.block_size = 16;
    fo.kv.type = k;
    fo.kv.v_type = v;
    INFO(kv_types_label(fo.kv));
    Forward fwd(m.config, m.weights, fast, fo);
    const auto ps = prompts();
    std::map<size_t, GenerateResult> alone;
    for (size_t i = 0; i < ps.size(); ++i) alone[i] = generate(fwd, ps[i], greedy(i, false));
    for (const bool reuse : {false, true}) {
      INFO("reuse " << reuse);
      Scheduler s(fwd, SchedulerOptions{3});
      for (size_t i = 0; i < ps.size(); ++i) s.submit(ps[i], greedy(i, reuse));
      std::map<size_t, GenerateResult> together;
      s.run([&](size_t i, GenerateResult&& r) { together[i] = std::move(r); });
      REQUIRE(together.size() == ps.size());
      for (size_t i = 0; i < ps.size(); ++i) {
        CHECK(together.at(i).generated_ids == alone.at(i).generated_ids);
        CHECK(together.at(i).last_logits_hash == alone.at(i).last_logits_hash);
      }
      // The shared prompt found the first's full block (16 positions) in the quantized pool.
      if (reuse) CHECK(together.at(2).n_reused == 16);
    }
  }
}

TEST_CASE("kvplan --measure's inputs are what the engine allocates for a MoE model "
          "(family_moe_mixtral)",
          "[cpu][plan]") {
  // --measure allocates the plan's weights (the GGUF's tensor bytes: every expert resident)
  // and KV cache: the engine maps exactly those weights and its cache holds only attention
  // (experts change no KV byte).
  const Model m(test::fixture_path("family_moe_mixtral/model.gguf"));
  const plan::ModelConfig p = cli::kvplan_model_from_gguf(m.file);
  REQUIRE(p.is_moe());
  plan::PlanInputs in = plan_for(p, 64, 2, KvType::F16, KvType::F16);
  in.weight = plan::parse_weight_format("gguf");  // kvplan --weight-type gguf: the file's bytes
  CHECK(plan::plan_memory(in, false).weights_bytes_per_gpu == weight_stats(m.weights).bytes);
  // q8_0 and q4_0 refuse rows that are not whole blocks of 32 (the fixture's kv_dim is 16).
  if (m.config.kv_dim() % 32 == 0)
    check_plan_matches_cache(m.config, p);
  else
    check_plan_matches_cache(m.config, p, {KvType::F32, KvType::F16});
}
