// The mixture-of-experts fixtures (tests/fixtures/family_moe_*: Mixtral's top-2 of 4 with
// renormalised weights, Qwen2-MoE's gated shared expert, Qwen3-MoE's top-4 of 8) through
// Forward on the CUDA backend (part of test_gpu_model, which skips without a GPU):
//   * parity with the CPU reference backend: the same 24 greedy ids, logits within 1e-3 at
//     every step (the routing kernels' expf may move a weight by an ulp, never an expert
//     choice on these models);
//   * batch invariance on the GPU, bitwise: a prompt decoded one token at a time equals the
//     same prompt interleaved with another sequence in one decode() call (the routed FFN
//     groups the chunk's tokens by expert; each token's rows stay its own).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "io/gguf.h"
#include "model/config.h"
#include "model/forward.h"
#include "model/weights.h"
#include "greedy_parity.h"

using namespace llmctl;

namespace {

// gptoss: attention sinks and windows, biases, swiglu_oai (tools/gen_gptoss_fixture.py).
const char* const kFamilies[] = {"mixtral", "qwen2moe", "qwen3moe", "gptoss"};
const std::vector<int32_t> kMoePrompt{1, 100, 37, 200, 55, 9, 120, 64};

std::string moe_fixture(const std::string& family) {
  return std::string(LLMCTL_SOURCE_DIR) + "/tests/fixtures/family_moe_" + family + "/model.gguf";
}

}  // namespace

TEST_CASE("MoE fixtures on the GPU: greedy ids and logits match the CPU reference", "[gpu]") {
  for (const char* family : kFamilies) {
    INFO(family);
    const GgufFile f = GgufFile::open(moe_fixture(family));
    const ModelConfig c = config_from_gguf(f);
    const ModelWeights w = bind_weights(f, c);
    cpu::CpuBackend cpu;
    cuda::CudaBackend gpu(0);
    Forward fc(c, w, cpu, 64);  // f32 KV cache
    Forward fg(c, w, gpu, 64);
    const test::GreedyParity p = test::greedy_parity(fc, fg, kMoePrompt, 24);
    INFO("max |logit gpu - cpu| over 24 steps = " << p.worst);
    CHECK(p.ids_b == p.ids_a);
    CHECK(p.worst < 1e-3);
  }
}

TEST_CASE("MoE fixtures on the GPU are batch-invariant through Forward, bitwise", "[gpu]") {
  for (const char* family : kFamilies) {
    INFO(family);
    const GgufFile f = GgufFile::open(moe_fixture(family));
    const ModelConfig c = config_from_gguf(f);
    const ModelWeights w = bind_weights(f, c);
    cuda::CudaBackend gpu(0);
    ForwardOptions opt;
    opt.max_batch_tokens = 64;
    opt.kv.block_size = 4;
    opt.kv.n_blocks = 32;
    const auto n = static_cast<int64_t>(kMoePrompt.size());
    Forward fa(c, w, gpu, opt);
    const int32_t sa = fa.add_sequence(32);
    std::vector<float> alone;
    for (const int32_t t : kMoePrompt) {
      REQUIRE(fa.reserve(sa, 1) == Reserve::Ok);
      alone = fa.decode({BatchToken{sa, t, true}});
    }
    Forward fb(c, w, gpu, opt);
    const int32_t other = fb.add_sequence(32);
    const int32_t sb = fb.add_sequence(32);
    REQUIRE(fb.reserve(other, n) == Reserve::Ok);
    REQUIRE(fb.reserve(sb, n) == Reserve::Ok);
    std::vector<BatchToken> batch;
    for (int64_t i = 0; i < n; ++i) {
      batch.push_back(BatchToken{other, static_cast<int32_t>(3 + i * 11), false});
      batch.push_back(BatchToken{sb, kMoePrompt[static_cast<size_t>(i)], i == n - 1});
    }
    const std::vector<float> mixed = fb.decode(batch);
    REQUIRE(alone.size() == static_cast<size_t>(c.n_vocab));
    CHECK(mixed == alone);
  }
}
