// The gemma3 row on tiny random-weight GGUFs (built here; the real 270M file is checked against
// llama.cpp in test_golden_llamacpp.cpp): the config reader's window keys, the fast CPU path
// against the scalar reference over a sequence several windows long, and the window itself:
//   * changing gemma3.attention.sliding_window changes the logits of positions past it (and
//     leaves those before it bit-identical);
//   * with one (windowed) layer, the logits at position p depend only on tokens
//     p - window + 1 .. p: they equal those of that slice run alone (RoPE rotates by relative
//     position in q . k, so starting the slice at 0 changes nothing but rounding), and a
//     window one longer does not (an off-by-one in "p - j < window" fails it).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_fast_backend.h"
#include "io/gguf.h"
#include "model/arch.h"
#include "model/config.h"
#include "model/forward.h"
#include "model/weights.h"
#include "support/tiny_gemma3.h"

using namespace llmctl;

namespace {

using test::TinyGemma;

GgufFile build(const TinyGemma& s) { return test::build_tiny_gemma3(s); }
std::vector<int32_t> prompt(size_t n) { return test::tiny_gemma3_prompt(n); }

using Logits = std::vector<std::vector<float>>;  // [position][n_vocab]

// One step per token on a fresh sequence; `fast`: the fast CPU backend (2 threads).
Logits run(const GgufFile& f, const std::vector<int32_t>& tokens, bool fast) {
  const ModelConfig c = config_from_gguf(f);
  const ModelWeights w = bind_weights(f, c);
  std::unique_ptr<Backend> be;
  if (fast)
    be = std::make_unique<cpu::CpuFastBackend>(2);
  else
    be = std::make_unique<cpu::CpuBackend>();
  Forward fwd(c, w, *be, static_cast<int64_t>(tokens.size()));
  Logits out;
  for (const int32_t t : tokens) out.push_back(fwd.step(t));
  return out;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i)
    m = std::max(m, std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
  return m;
}

}  // namespace

TEST_CASE("tiny gemma3: the config reader's window and per-layer RoPE bases", "[cpu]") {
  const GgufFile f = build({});
  const ModelConfig c = config_from_gguf(f);
  CHECK(c.arch == "gemma3");
  CHECK(c.rope_type == RopeType::Neox);
  CHECK(c.sliding_window == 8);
  CHECK(c.embd_scale == 8.0);
  for (int64_t il = 0; il < 6; ++il) {
    INFO("layer " << il);
    const bool global = il == 5;
    CHECK(layer_window(c, il) == (global ? 0 : 8));
    CHECK(layer_rope_base(c, il) == (global ? 1e6 : 10000.0));
  }
  // Without the key every layer is global with the file's base, as in llama.cpp.
  const ModelConfig g = config_from_gguf(build({6, 0}));
  for (int64_t il = 0; il < 6; ++il) {
    CHECK(layer_window(g, il) == 0);
    CHECK(layer_rope_base(g, il) == 1e6);
  }
  // The file's pattern period overrides the row's 6: layers 1, 3, 5 global.
  const ModelConfig p2 = config_from_gguf(build({6, 8, 2}));
  for (int64_t il = 0; il < 6; ++il) CHECK(layer_window(p2, il) == (il % 2 == 1 ? 0 : 8));
  // A final-logit soft-cap in the file is read (gemma3 has none without it), and applied.
  CHECK(g.final_softcap == 0.0);
  const GgufFile capped = build({6, 8, 0, 2.0f});
  CHECK(config_from_gguf(capped).final_softcap == 2.0);
  const std::vector<int32_t> tokens = {3, 14, 15};
  const auto logits = run(capped, tokens, false);
  for (const float x : logits.back()) CHECK(std::abs(x) < 2.0f);
  CHECK(max_abs_diff(logits.back(), run(build({6, 8}), tokens, false).back()) > 0.01);
}

// llama.cpp's f_attention_scale: 1/sqrt(n_embd / n_head) for the 62-layer 27B only (where
// 5376 / 32 = 168 differs from head_dim 128), 1/sqrt(head_dim) for every other size.
TEST_CASE("gemma3: the 27B's attention scale follows llama.cpp's rule", "[cpu]") {
  const ArchRow* row = find_arch_by_gguf("gemma3");
  REQUIRE(row != nullptr);
  ModelConfig big;
  big.n_layers = 62;
  big.n_embd = 5376;
  big.n_heads = 32;
  big.head_dim = 128;
  apply_arch_row(*row, big);
  CHECK(big.attn_scale == Approx(1.0 / std::sqrt(168.0)).epsilon(1e-12));
  ModelConfig small = big;  // Gemma 3 4B: 34 layers, 2560 / 8 = 320, head_dim 256
  small.n_layers = 34;
  small.n_embd = 2560;
  small.n_heads = 8;
  small.head_dim = 256;
  small.attn_scale = 0.0;
  apply_arch_row(*row, small);
  CHECK(small.attn_scale == 0.0);  // the op's 1/sqrt(head_dim)
  CHECK(unimplemented_math(big).empty());
}

TEST_CASE("tiny gemma3: the fast CPU path matches the reference over four windows", "[cpu]") {
  // 1e-4 as for the tiny F32 llama/qwen2 models (test_model_reference.cpp): f32 arithmetic
  // over sums of at most 96 terms; here 6 layers with post-norms that keep the residual small.
  const GgufFile f = build({});
  const std::vector<int32_t> tokens = prompt(32);
  const Logits ref = run(f, tokens, false), fast = run(f, tokens, true);
  double worst = 0;
  for (size_t p = 0; p < tokens.size(); ++p) worst = std::max(worst, max_abs_diff(ref[p], fast[p]));
  INFO("max |dlogit| fast vs reference: " << worst);
  CHECK(worst < 1e-4);  // measured 6.1e-6
  for (const float x : ref.back()) CHECK(std::isfinite(x));
}

TEST_CASE("tiny gemma3: the window changes logits only past it", "[cpu]") {
  const std::vector<int32_t> tokens = prompt(24);
  for (const bool fast : {false, true}) {
    INFO((fast ? "fast" : "reference"));
    const Logits w8 = run(build({6, 8}), tokens, fast), w16 = run(build({6, 16}), tokens, fast);
    for (size_t p = 0; p < 8; ++p) CHECK(max_abs_diff(w8[p], w16[p]) == 0.0);
    for (size_t p = 8; p < tokens.size(); ++p) {
      INFO("position " << p);
      CHECK(max_abs_diff(w8[p], w16[p]) > 1e-3);
    }
  }
}

TEST_CASE("tiny gemma3: one windowed layer sees exactly the last `window` tokens", "[cpu]") {
  constexpr size_t kWindow = 5;
  const std::vector<int32_t> tokens = prompt(20);
  for (const bool fast : {false, true}) {
    INFO((fast ? "fast" : "reference"));
    const Logits full = run(build({1, kWindow}), tokens, fast);
    const Logits wider = run(build({1, kWindow + 1}), tokens, fast);
    for (const size_t p : {size_t{7}, size_t{13}, size_t{19}}) {
      INFO("position " << p);
      const std::vector<int32_t> slice(tokens.begin() + static_cast<std::ptrdiff_t>(p + 1 - kWindow),
                                       tokens.begin() + static_cast<std::ptrdiff_t>(p + 1));
      const Logits alone = run(build({1, kWindow}), slice, fast);
      CHECK(max_abs_diff(full[p], alone.back()) < 1e-4);
      CHECK(max_abs_diff(wider[p], alone.back()) > 1e-3);  // 10x the bound above
    }
  }
}
