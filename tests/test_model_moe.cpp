// Mixture-of-experts models end to end (model/moe_ffn.h), on the tiny random-weight GGUFs of
// tools/gen_moe_fixtures.py (tests/fixtures/family_moe_<name>/: mixtral = llama with 4 experts
// top-2, qwen2moe = 4 experts top-2 not renormalised plus a gated shared expert, qwen3moe = 8
// experts top-4 with QK-norm): the CPU reference path against llama.cpp's logits (within 1e-3,
// greedy ids identical), the fast path against the reference, batch and thread invariance
// (bits), what the reader takes from the files and what it refuses. Regenerate the fixtures:
//   ~/.cache/llmctl/ref-venv/bin/python tools/gen_moe_fixtures.py --out tests/fixtures
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_fast_backend.h"
#include "core/error.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "model/forward.h"
#include "model/model_loader.h"
#include "support/fixtures.h"
#include "support/hf_dirs.h"
#include "support/logit_rows.h"
#include "support/model_runs.h"
#include "support/test_data.h"

using namespace llmctl;
using Catch::Matchers::Contains;
using llmctl::test::as_double;
using llmctl::test::fixture_path;
using llmctl::test::max_abs_diff;
using llmctl::test::Logits;
using llmctl::test::Run;
using llmctl::test::run_batched;
using llmctl::test::run_steps;
namespace gv = llmctl::gguf_value;

namespace {

const char* const kFamilies[] = {"mixtral", "qwen2moe", "qwen3moe"};

std::string gguf_of(const std::string& family) {
  return fixture_path("family_moe_" + family + "/model.gguf");
}

struct Golden {
  std::vector<int32_t> tokens, greedy;
  std::vector<std::vector<double>> logits;
};

Golden golden(const std::string& family) {
  const nlohmann::json j = nlohmann::json::parse(
      llmctl::test::read_file(fixture_path("family_moe_" + family + "/llamacpp_logits.json")));
  return {j["tokens"].get<std::vector<int32_t>>(), j["greedy_ids"].get<std::vector<int32_t>>(),
          j["logits"].get<std::vector<std::vector<double>>>()};
}

// `b` with its metadata keys renamed by `rename` ("" drops a key), tensors as they are.
GgufBuilder rekeyed(const GgufBuilder& b,
                    const std::function<std::string(const std::string&)>& rename) {
  GgufBuilder c;
  for (const GgufKV& kv : b.metadata()) {
    const std::string key = rename(kv.key);
    if (!key.empty()) c.set(key, kv.value);
  }
  for (const GgufBuilder::Tensor& t : b.tensors()) c.add_tensor(t.name, t.type, t.shape, t.bytes);
  return c;
}

std::function<void(GgufBuilder&)> erase(const std::string& key) {
  return [key](GgufBuilder& b) {
    b = rekeyed(b, [&](const std::string& k) { return k == key ? std::string() : k; });
  };
}

// The fixture with metadata edited, written to a temporary file.
std::string edited_copy(const std::string& family, const std::string& tag,
                        const std::function<void(GgufBuilder&)>& edit) {
  GgufBuilder b = GgufBuilder::from_file(GgufFile::open(gguf_of(family)));
  edit(b);
  const std::string path = llmctl::test::temp_dir() + "/moe-" + family + "-" + tag + ".gguf";
  b.write(path);
  return path;
}

std::string load_error(const std::string& path) {
  try {
    (void)load_model(path);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

// The CPU reference backend without the expert ops, as a device backend without kernels is.
class NoMoeBackend final : public cpu::CpuBackend {
 public:
  bool supports_moe() const override { return false; }
};

// Counts the matmuls of each weight (by its data: each expert view has its own) and their rows.
class CountingBackend final : public cpu::CpuBackend {
 public:
  std::map<const void*, int> calls;
  std::map<const void*, int64_t> rows;

 protected:
  void matmul_impl(const WeightView& w, const Buffer& x, int64_t n_tokens, Buffer& out) override {
    ++calls[w.data];
    rows[w.data] += n_tokens;
    cpu::CpuBackend::matmul_impl(w, x, n_tokens, out);
  }
};

// Counts the routing the observer is shown.
class RoutingCounter final : public ForwardObserver {
 public:
  bool wants_moe_routing() const override { return true; }
  void on_moe_routing(int64_t layer, const ObservedBatch& batch, const float* /*logits*/,
                      int64_t n_expert, const int32_t* ids, const float* weights,
                      int64_t k) override {
    layers.push_back(layer);
    for (int64_t t = 0; t < batch.n_tokens; ++t) {
      double sum = 0.0;
      for (int64_t r = 0; r < k; ++r) {
        CHECK(ids[t * k + r] >= 0);
        CHECK(ids[t * k + r] < n_expert);
        sum += static_cast<double>(weights[t * k + r]);
      }
      sums.push_back(sum);
    }
  }
  std::vector<int64_t> layers;
  std::vector<double> sums;
};

}  // namespace

TEST_CASE("moe: the reference path matches llama.cpp", "[cpu][golden]") {
  for (const std::string family : kFamilies) {
    INFO(family);
    const Golden g = golden(family);
    const LoadedModel m = load_model(gguf_of(family));
    cpu::CpuBackend be;
    const Run r = run_steps(m, be, g.tokens, g.greedy.size());
    const double diff = max_abs_diff(r.logits, g.logits);
    WARN(family << ": max |logit - llama.cpp| = " << diff);
    CHECK(diff < 1e-3);
    CHECK(r.greedy == g.greedy);
  }
}

TEST_CASE("moe: the fast CPU path matches the reference", "[cpu]") {
  for (const std::string family : kFamilies) {
    INFO(family);
    const Golden g = golden(family);
    const LoadedModel m = load_model(gguf_of(family));
    cpu::CpuBackend slow_be;
    cpu::CpuFastBackend fast_be(2);
    const Run slow = run_steps(m, slow_be, g.tokens, g.greedy.size());
    const Run fast = run_steps(m, fast_be, g.tokens, g.greedy.size());
    const double diff = max_abs_diff(fast.logits, as_double(slow.logits));
    WARN(family << ": max |fast - reference| = " << diff);
    CHECK(diff < 1e-4);
    CHECK(fast.greedy == slow.greedy);
  }
}

TEST_CASE("moe: a token's logits have the same bits alone or batched, at 1 or 2 threads", "[cpu]") {
  for (const std::string family : kFamilies) {
    INFO(family);
    const Golden g = golden(family);
    const LoadedModel m = load_model(gguf_of(family));
    const std::vector<int32_t> a(g.tokens.begin(), g.tokens.begin() + 14);
    const std::vector<int32_t> b(g.tokens.begin() + 14, g.tokens.end());
    cpu::CpuBackend ref;
    cpu::CpuFastBackend one(1), two(2);
    for (Backend* be : std::initializer_list<Backend*>{&ref, &one, &two}) {
      INFO(be->name());
      const Logits alone_a = run_steps(m, *be, a, 0).logits;
      const Logits alone_b = run_steps(m, *be, b, 0).logits;
      // Both prompts at once: every token of a chunk shares the experts' matmuls with others.
      const std::vector<Logits> both = run_batched(m, *be, {a, b});
      CHECK(both[0] == alone_a);
      CHECK(both[1] == alone_b);
    }
    CHECK(run_batched(m, one, {a, b}) == run_batched(m, two, {a, b}));
  }
}

TEST_CASE("moe: each chosen expert runs once per chunk, on all of its tokens", "[cpu]") {
  for (const std::string family : kFamilies) {
    INFO(family);
    const LoadedModel m = load_model(gguf_of(family));
    CountingBackend be;
    const std::vector<Logits> out = run_batched(m, be, {golden(family).tokens});  // one chunk
    REQUIRE(out[0].size() == 24);
    for (const LayerWeights& host : m.weights.layers) {
      const LayerWeights l = split_fused_layer(host, m.config);
      int64_t routed_rows = 0;
      for (const LayerWeights::Expert& e : l.experts) {
        CHECK(be.calls[e.gate.data] <= 1);
        CHECK(be.calls[e.up.data] == be.calls[e.gate.data]);
        CHECK(be.calls[e.down.data] == be.calls[e.gate.data]);
        routed_rows += be.rows[e.gate.data];
      }
      CHECK(routed_rows == 24 * m.config.n_experts_used);  // every (token, rank) slot once
      CHECK(be.calls[host.ffn_gate_inp.data] == 1);
    }
  }
}

TEST_CASE("moe: what the reader takes from the files", "[cpu]") {
  const LoadedModel x = load_model(gguf_of("mixtral"));
  CHECK(x.config.arch == "llama");
  CHECK(x.config.n_experts == 4);
  CHECK(x.config.n_experts_used == 2);
  CHECK(x.config.n_ff_expert == 64);  // llama: feed_forward_length
  CHECK(x.config.moe_renormalize);
  CHECK_FALSE(x.config.moe_gated_shared_expert);
  const LayerWeights& l = x.weights.layers[1];
  CHECK_FALSE(l.w_gate.present());
  CHECK_FALSE(l.w_down.present());
  CHECK(l.ffn_gate_inp.n_rows == 4);
  CHECK(l.ffn_gate_exps.n_cols == 32);
  CHECK(l.ffn_gate_exps.n_rows == 4 * 64);  // the 3-D [32, 64, 4] as 256 rows
  CHECK(l.ffn_down_exps.n_cols == 64);
  CHECK(l.ffn_down_exps.n_rows == 4 * 32);
  // Each expert a row view of the 3-D tensor, in place.
  const LayerWeights s = split_fused_layer(l, x.config);
  REQUIRE(s.experts.size() == 4);
  CHECK_FALSE(s.ffn_up_exps.present());
  const auto* up = static_cast<const uint8_t*>(l.ffn_up_exps.data);
  CHECK(s.experts[3].up.data == up + 3 * 64 * 32 * 4);
  CHECK(s.experts[3].up.n_rows == 64);
  CHECK(s.experts[3].up.row0 == 3 * 64);
  CHECK(s.experts[2].down.data ==
        static_cast<const uint8_t*>(l.ffn_down_exps.data) + 2 * 32 * 64 * 4);
  CHECK(s.experts[2].down.n_cols == 64);

  // A decode step reads the chosen half of each layer's 3 x 32 KiB of expert matrices.
  ModelWeights all = x.weights;
  all.expert_share = 1.0;
  CHECK(x.weights.expert_share == 0.5);
  CHECK(weight_stats(all).bytes_per_token - weight_stats(x.weights).bytes_per_token ==
        2 * 3 * 32 * 64 * 4 * 4 / 2);
  CHECK(weight_stats(all).matmul_params - weight_stats(x.weights).matmul_params ==
        2 * 3 * 32 * 64 * 4 / 2);
  CHECK(weight_stats(all).params == weight_stats(x.weights).params);

  const ModelConfig q2 = load_model(gguf_of("qwen2moe")).config;
  CHECK(q2.n_ff_expert == 32);  // expert_feed_forward_length (not n_ff 80 / 2)
  CHECK(q2.n_ff_shared == 48);  // expert_shared_feed_forward_length (not n_ff 80)
  CHECK_FALSE(q2.moe_renormalize);
  CHECK(q2.moe_gated_shared_expert);
  CHECK(q2.has_qkv_bias);
  const ModelConfig q3 = load_model(gguf_of("qwen3moe")).config;
  CHECK(q3.n_experts == 8);
  CHECK(q3.n_experts_used == 4);
  CHECK(q3.n_ff_expert == 16);
  CHECK(q3.moe_renormalize);
  CHECK(q3.qk_norm == QkNorm::PerHead);
}

TEST_CASE("moe: files the reader refuses, and the fallbacks of missing sizes", "[cpu]") {
  const auto set_u32 = [](const char* key, uint32_t v) {
    return [=](GgufBuilder& b) { b.set(key, gv::u32(v)); };
  };
  CHECK_THAT(load_error(edited_copy("mixtral", "k5", set_u32("llama.expert_used_count", 5))),
             Contains("llama.expert_used_count = 5 is outside [1, expert_count = 4]"));
  CHECK_THAT(load_error(edited_copy("mixtral", "k0", set_u32("llama.expert_used_count", 0))),
             Contains("llama.expert_used_count = 0 is outside [1, expert_count = 4]"));
  CHECK_THAT(load_error(edited_copy("qwen3moe", "dense-lead",
                                    set_u32("qwen3moe.leading_dense_block_count", 1))),
             Contains("leading_dense_block_count = 1"));
  CHECK_THAT(load_error(edited_copy("qwen3moe", "no-experts", erase("qwen3moe.expert_count"))),
             Contains("missing metadata key 'qwen3moe.expert_count'"));
  // Without expert_feed_forward_length llama.cpp's qwen loaders take n_ff / k: 96 / 4 = 24,
  // which the tensors then contradict.
  CHECK_THAT(
      load_error(
          edited_copy("qwen3moe", "no-exp-ff", erase("qwen3moe.expert_feed_forward_length"))),
      Contains("tensor 'blk.0.ffn_gate_exps.weight': expected [32, 24, 8], got [32, 16, 8]"));
  CHECK_THAT(load_error(edited_copy("qwen2moe", "no-shared-ff",
                                    erase("qwen2moe.expert_shared_feed_forward_length"))),
             Contains("tensor 'blk.0.ffn_gate_shexp.weight': expected [32, 80], got [32, 48]"));
  // ... and where they agree, the same model (llama.cpp 0.3.36 loads both the same way; checked
  // by hand with tools/gen_moe_fixtures.py's writer): experts of feed_forward_length 64 / 4,
  // a shared expert of feed_forward_length 48.
  const auto same_logits = [](const std::string& family, const std::string& path) {
    const Golden g = golden(family);
    cpu::CpuBackend be;
    return max_abs_diff(run_steps(load_model(path), be, g.tokens, 0).logits, g.logits);
  };
  const std::string q3 = edited_copy("qwen3moe", "ff-fallback", [&](GgufBuilder& b) {
    erase("qwen3moe.expert_feed_forward_length")(b);
    b.set("qwen3moe.feed_forward_length", gv::u32(64));
  });
  CHECK(load_model(q3).config.n_ff_expert == 16);
  CHECK(same_logits("qwen3moe", q3) < 1e-3);
  const std::string q2 = edited_copy("qwen2moe", "shared-fallback", [&](GgufBuilder& b) {
    erase("qwen2moe.expert_shared_feed_forward_length")(b);
    b.set("qwen2moe.feed_forward_length", gv::u32(48));
  });
  CHECK(load_model(q2).config.n_ff_shared == 48);
  CHECK(same_logits("qwen2moe", q2) < 1e-3);
  // A dense row with experts.
  const auto as_qwen3 = [](GgufBuilder& b) {
    b = rekeyed(b, [](const std::string& k) {
      return k.rfind("qwen3moe.", 0) == 0 ? "qwen3." + k.substr(9) : k;
    });
    b.set("general.architecture", gv::string("qwen3"));
  };
  CHECK_THAT(load_error(edited_copy("qwen3moe", "as-qwen3", as_qwen3)),
             Contains("qwen3.expert_count = 8: architecture 'qwen3' has no mixture-of-experts "
                      "form"));
}

TEST_CASE("moe: a Hugging Face directory with experts is refused", "[cpu]") {
  const std::string dir =
      llmctl::test::edited_hf_copy("family_qwen3", "experts", [](nlohmann::json& c) {
        c["num_experts"] = 8;
        c["num_experts_per_tok"] = 2;
      });
  CHECK_THAT(llmctl::test::load_model_error(dir),
             Contains("8 experts: llmctl reads mixture-of-experts models from GGUF only"));
}

TEST_CASE("moe: a backend without the expert ops is refused by name", "[cpu]") {
  const LoadedModel m = load_model(gguf_of("mixtral"));
  NoMoeBackend be;
  CHECK_THROWS_WITH(Forward(m.config, m.weights, be, 16),
                    Contains("backend has no mixture-of-experts ops, which architecture 'llama' "
                             "(4 experts) needs"));
}

TEST_CASE("moe: the observer sees each layer's routing", "[cpu]") {
  for (const std::string family : kFamilies) {
    INFO(family);
    const LoadedModel m = load_model(gguf_of(family));
    cpu::CpuBackend be;
    Forward fwd(m.config, m.weights, be, 8);
    RoutingCounter obs;
    fwd.set_observer(&obs);
    for (const int32_t t : {1, 17, 42}) fwd.step(t);
    CHECK(obs.layers == std::vector<int64_t>{0, 1, 0, 1, 0, 1});
    for (const double s : obs.sums) {
      if (m.config.moe_renormalize)
        CHECK(s == Approx(1.0).margin(1e-6));
      else
        CHECK(s < 1.0);
    }
  }
}
