// Whole-model checks of the CUDA backend on stories260K (its own executable: it skips, exit 77,
// without a GPU or without the model file):
//   * parity with the CPU reference backend: the same 48 greedy ids, logits within 1e-3 at
//     every step (f32 KV cache, f32 weights);
//   * batch invariance through Forward, bitwise on the GPU: a prompt decoded one token at a
//     time, in one batch, and interleaved with another sequence gives identical logits;
//   * the cuBLAS prefill mode (batch_invariant = false): a 96-token prompt in one batch (above
//     the GEMM threshold) within f16-input rounding of the CPU reference;
//   * a tiny gemma3 (window 8) generating far past its window, where the windowed layers' block
//     tables hold released entries (kNoBlock): both kernels never read them (a read would set
//     the device error), logits within 1e-3 of the CPU reference.
#define CATCH_CONFIG_RUNNER
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "gpu_main.h"
#include "greedy_parity.h"
#include "io/gguf.h"
#include "model/config.h"
#include "model/forward.h"
#include "model/weights.h"
#include "support/test_data.h"
#include "support/tiny_gemma3.h"

using namespace llmctl;

namespace {

const std::vector<int32_t> kPrompt{1, 365, 301, 285, 343, 260, 412};

}  // namespace

TEST_CASE("stories260K on the GPU: greedy ids and logits match the CPU reference", "[gpu]") {
  const GgufFile f = GgufFile::open(test::require_test_file("models/stories260K.gguf"));
  const ModelConfig c = config_from_gguf(f);
  const ModelWeights w = bind_weights(f, c);
  cpu::CpuBackend cpu;
  cuda::CudaBackend gpu(0);
  Forward fc(c, w, cpu, 128);  // f32 KV cache
  Forward fg(c, w, gpu, 128);
  const test::GreedyParity p = test::greedy_parity(fc, fg, kPrompt, 48);
  INFO("max |logit gpu - cpu| over 48 steps = " << p.worst);
  CHECK(p.ids_b == p.ids_a);
  CHECK(p.worst < 1e-3);
}

TEST_CASE("stories260K on the GPU is batch-invariant through Forward, bitwise", "[gpu]") {
  const GgufFile f = GgufFile::open(test::require_test_file("models/stories260K.gguf"));
  const ModelConfig c = config_from_gguf(f);
  const ModelWeights w = bind_weights(f, c);
  cuda::CudaBackend gpu(0);
  ForwardOptions opt;
  opt.max_batch_tokens = 64;
  opt.kv.block_size = 4;  // several blocks per sequence
  opt.kv.n_blocks = 64;
  opt.kv.type = KvType::F16;
  const auto n = static_cast<int64_t>(kPrompt.size());

  // (a) one token per decode() call
  Forward fa(c, w, gpu, opt);
  const int32_t sa = fa.add_sequence(64);
  std::vector<float> alone;
  for (const int32_t t : kPrompt) {
    REQUIRE(fa.reserve(sa, 1) == Reserve::Ok);
    alone = fa.decode({BatchToken{sa, t, true}});
  }
  // (b) the whole prompt in one decode() call
  Forward fb(c, w, gpu, opt);
  const int32_t sb = fb.add_sequence(64);
  REQUIRE(fb.reserve(sb, n) == Reserve::Ok);
  std::vector<BatchToken> batch;
  for (int64_t i = 0; i < n; ++i)
    batch.push_back(BatchToken{sb, kPrompt[static_cast<size_t>(i)], i == n - 1});
  const std::vector<float> one_batch = fb.decode(batch);
  // (c) interleaved with another sequence (an other prompt) in the same decode() call
  Forward fc(c, w, gpu, opt);
  const int32_t other = fc.add_sequence(64);
  const int32_t sc = fc.add_sequence(64);
  REQUIRE(fc.reserve(other, n) == Reserve::Ok);
  REQUIRE(fc.reserve(sc, n) == Reserve::Ok);
  batch.clear();
  for (int64_t i = 0; i < n; ++i) {
    batch.push_back(BatchToken{other, static_cast<int32_t>(2 + i * 7), false});
    batch.push_back(BatchToken{sc, kPrompt[static_cast<size_t>(i)], i == n - 1});
  }
  const std::vector<float> mixed = fc.decode(batch);

  REQUIRE(alone.size() == static_cast<size_t>(c.n_vocab));
  CHECK(one_batch == alone);
  CHECK(mixed == alone);
}

TEST_CASE("stories260K with cuBLAS prefill: last logits within f16 rounding of the CPU", "[gpu]") {
  const GgufFile f = GgufFile::open(test::require_test_file("models/stories260K.gguf"));
  const ModelConfig c = config_from_gguf(f);
  const ModelWeights w = bind_weights(f, c);
  cpu::CpuBackend cpu;
  cuda::CudaBackend gpu(0, /*batch_invariant=*/false);
  ForwardOptions opt;
  opt.max_batch_tokens = 128;
  opt.kv.block_size = 16;
  opt.kv.n_blocks = 8;
  opt.kv.type = KvType::F32;
  const int64_t n = 96;  // >= the GEMM threshold for F32 weights (cuda::Gemm::worth_it)
  std::vector<BatchToken> batch;
  for (int64_t i = 0; i < n; ++i) {
    const auto id = i == 0 ? 1 : static_cast<int32_t>(2 + (i * 37) % (c.n_vocab - 2));
    batch.push_back(BatchToken{0, id, i == n - 1});
  }
  const auto prefill = [&](Backend& be) {
    Forward fw(c, w, be, opt);
    const int32_t s = fw.add_sequence(128);
    REQUIRE(fw.reserve(s, n) == Reserve::Ok);
    std::vector<BatchToken> b = batch;
    for (BatchToken& t : b) t.seq = s;
    return fw.decode(b);
  };
  const std::vector<float> lc = prefill(cpu), lg = prefill(gpu);
  REQUIRE(lc.size() == lg.size());
  double worst = 0.0;
  for (size_t k = 0; k < lc.size(); ++k)
    worst = std::max(worst, std::fabs(static_cast<double>(lc[k]) - static_cast<double>(lg[k])));
  // Each matmul input is rounded to f16 (relative 2^-11 ~ 5e-4) over 5 layers x 7 matmuls of
  // logits of magnitude ~10: a few 1e-2 at worst; a wrong transpose, tile or row moves them by
  // ~1 or more.
  INFO("max |logit gpu(cuBLAS) - cpu| = " << worst);
  CHECK(worst < 5e-2);
}

int main(int argc, char** argv) { return test::run_gpu_tests(argc, argv, "test_gpu_model"); }

TEST_CASE("tiny gemma3 on the GPU past its window: released blocks are never read", "[gpu]") {
  const GgufFile f = test::build_tiny_gemma3({});
  const ModelConfig c = config_from_gguf(f);
  const ModelWeights w = bind_weights(f, c);
  cpu::CpuBackend cpu;
  cuda::CudaBackend gpu(0);
  ForwardOptions opt;
  opt.max_batch_tokens = 16;  // a 40-token prompt in chunks of 16 (the prefill kernel)
  opt.kv.block_size = 4;
  opt.kv.n_blocks = 32;
  opt.kv.type = KvType::F32;
  opt.kv.max_sequences = 1;
  Forward fc(c, w, cpu, opt), fg(c, w, gpu, opt);
  const int32_t sc = fc.add_sequence(128), sg = fg.add_sequence(128);
  REQUIRE(fc.reserve(sc, 120) == Reserve::Ok);
  REQUIRE(fg.reserve(sg, 120) == Reserve::Ok);
  std::vector<BatchToken> bc, bg;
  for (const int32_t t : test::tiny_gemma3_prompt(40)) {
    bc.push_back(BatchToken{sc, t, false});
    bg.push_back(BatchToken{sg, t, false});
  }
  bc.back().logits = bg.back().logits = true;
  double worst = 0.0;
  for (int step = 0; step < 64; ++step) {
    const std::vector<float> lc = fc.decode(bc), lg = fg.decode(bg);
    REQUIRE(lc.size() == lg.size());
    for (size_t k = 0; k < lc.size(); ++k)
      worst = std::max(worst, std::fabs(static_cast<double>(lc[k]) - static_cast<double>(lg[k])));
    const int32_t next = test::argmax_id(lc);
    bc = {BatchToken{sc, next, true}};
    bg = {BatchToken{sg, next, true}};
  }
  CHECK(fg.cache().block_table(sg, 1).front() == PagedKvCache::kNoBlock);  // released
  INFO("max |logit gpu - cpu| over 64 steps = " << worst);
  CHECK(worst < 1e-3);
}
