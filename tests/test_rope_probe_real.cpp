// rope-probe on the real files users run (skipped without them): SmolLM2-135M (llama, one
// RoPE group) and Gemma 3 270M (5 of 6 layers windowed, local base 10000 against the global
// 1e6). On the backend rope-probe uses (f32 activations) the shift probe finds no shift
// dependence, also past the window and with a prompt longer than a shortened window, and
// the ablation sees the positions. Broken configurations fail the check that should see them:
// the other pair layout and a wrong base per layer group (the sweep, naming the variant that
// fits), positions frozen by rope_freqs divisors of 1e30 (the ablation). Broken GGUF files
// (a changed freq_base) are in test_cli_rope_probe.cpp.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "backend/selection.h"
#include "diag/rope_probe.h"
#include "diag/rope_probe_check.h"
#include "model/model_loader.h"
#include "support/test_data.h"

using namespace llmctl;

namespace {

// The model on the backend `llmctl rope-probe` uses (f32 activations, diag/rope_probe.h),
// with inputs cut short to keep these tests at a few seconds of CPU each: Gemma 3's 262k-row
// output layer makes every logits row cost ~170M multiply-adds.
struct Real {
  explicit Real(const std::string& path) : m(load_model(path)), tok(Tokenizer::from_gguf(*m.gguf)) {
    BackendChoice choice{"cpu", 2, false};
    choice.float_activations = true;
    backend = make_backend(choice);
    prompt = tok.encode(kRopeProbePrompt, true);
    prompt.resize(20);
    // ~40 tokens of the sweep's text: too short to rank the base x10 variants of a healthy
    // file (the default text is; test_cli_rope_probe.cpp), long enough for the variants
    // below, which miss by 0.1 to 3 nats/token.
    reference = tok.encode(std::string(kRopeProbeReference).substr(0, 160), true);
  }
  LoadedModel m;
  Tokenizer tok;
  std::unique_ptr<Backend> backend;
  std::vector<int32_t> prompt, reference;

  // The sweep's verdict under `c` (check_rope_probe's lines; nothing else judged).
  std::vector<std::string> sweep_failures(const ModelConfig& c) {
    RopeProbeReport r;
    r.probes = RopeProbeSet{false, false, false, true};
    r.sweep = probe_sweep(c, m.weights, *backend, reference);
    return check_rope_probe(r, RopeThresholds{});
  }
  // The ablation's verdict with the weights `w`.
  std::vector<std::string> ablation_failures(const ModelWeights& w) {
    RopeProbeReport r;
    r.probes = RopeProbeSet{false, true, false, false};
    r.ablation = probe_ablation(m.config, w, *backend, prompt, 1);
    return check_rope_probe(r, RopeThresholds{});
  }
};

std::string smollm2() { return test::require_test_file("models/SmolLM2-135M-Instruct.Q4_1.gguf"); }
std::string gemma3() { return test::require_fetched_model("gemma-3-270m-q4_k_m.gguf"); }

void check_shift_invariant(const std::vector<ShiftRow>& rows) {
  const RopeThresholds t;
  for (const ShiftRow& r : rows) {
    INFO("offset " << r.offset << ": KL " << r.kl_max << ", dlogit " << r.max_dlogit);
    CHECK(r.kl_max <= t.max_shift_kl);
    CHECK(r.max_dlogit <= t.max_shift_dlogit);
  }
}

// rope_freqs divisors of 1e30 on every pair: every angle ~0, so no layer sees a position.
std::vector<float> frozen_divisors(const ModelConfig& c) {
  return std::vector<float>(static_cast<size_t>(c.n_rot / 2), 1e30f);
}

ModelWeights with_divisors(const ModelWeights& w, const std::vector<float>& div) {
  ModelWeights f = w;
  f.rope_freqs.data = div.data();
  f.rope_freqs.type = GgmlType::F32;
  f.rope_freqs.n_cols = static_cast<int64_t>(div.size());
  f.rope_freqs.n_rows = 1;
  f.rope_freqs.name = "rope_freqs.weight";
  return f;
}

// Whether a failure line starts with `prefix` (all lines are reported when none does).
bool starts_with(const std::vector<std::string>& lines, const std::string& prefix) {
  for (const std::string& l : lines)
    if (l.rfind(prefix, 0) == 0) return true;
  UNSCOPED_INFO(lines.size() << " failure lines, none starting with " << prefix);
  for (const std::string& l : lines) UNSCOPED_INFO(l);
  return false;
}

}  // namespace

TEST_CASE("rope-probe on SmolLM2: shift invariant, and pairing or frozen positions fail",
          "[cpu][slow]") {
  Real r(smollm2());
  const ModelConfig& c = r.m.config;
  REQUIRE(rope_layer_groups(c).size() == 1);
  check_shift_invariant(probe_shift(c, r.m.weights, *r.backend, r.prompt, {1024, 32768}));
  CHECK(r.ablation_failures(r.m.weights).empty());

  ModelConfig flipped = c;
  REQUIRE(flipped.rope_type == RopeType::Normal);
  flipped.rope_type = RopeType::Neox;
  CHECK(starts_with(r.sweep_failures(flipped), "sweep: 'normal pairs'"));

  const std::vector<float> div = frozen_divisors(c);
  const ModelWeights frozen = with_divisors(r.m.weights, div);
  CHECK(starts_with(r.ablation_failures(frozen), "ablation: KL with all positions 0"));
  // Frozen positions are trivially shift invariant: the shift probe alone cannot see them.
  check_shift_invariant(probe_shift(c, frozen, *r.backend, r.prompt, {1024}));
}

// Both layer groups; shift invariant past the window; broken pairing, local base and frozen
// positions fail.
TEST_CASE("rope-probe on Gemma 3: layer groups, windows, broken configs fail", "[cpu][slow]") {
  Real r(gemma3());
  const ModelConfig& c = r.m.config;
  const std::vector<RopeLayerGroup> groups = rope_layer_groups(c);
  REQUIRE(groups.size() == 2);
  CHECK(groups[0].local);
  CHECK(groups[0].layers.size() == 15);
  CHECK(groups[0].window == 512);
  CHECK(groups[0].freq_base == 10000.0);
  CHECK(!groups[1].local);
  CHECK(groups[1].layers == std::vector<int64_t>{5, 11, 17});
  CHECK(groups[1].window == 0);
  CHECK(groups[1].freq_base == 1e6);
  CHECK(describe_rope(c) == "neox pairs, global base 1e+06, local base 10000, global scale 1");
  // Offsets beyond the 512-position window and the training context.
  check_shift_invariant(probe_shift(c, r.m.weights, *r.backend, r.prompt, {1024, 40000}));
  // A prompt longer than the window: a window of 8 positions on the local layers.
  ModelConfig narrow = c;
  narrow.sliding_window = 8;
  REQUIRE(static_cast<int64_t>(r.prompt.size()) > 2 * narrow.sliding_window);
  check_shift_invariant(probe_shift(narrow, r.m.weights, *r.backend, r.prompt, {1024}));
  CHECK(r.ablation_failures(r.m.weights).empty());

  ModelConfig v = c;
  v.rope_type = RopeType::Normal;
  CHECK(starts_with(r.sweep_failures(v), "sweep: 'neox pairs'"));
  v = c;
  v.window.local_rope_base = 1e5;  // metadata claiming a local base 10x the trained one
  CHECK(starts_with(r.sweep_failures(v), "sweep: 'local base /10'"));
  const std::vector<float> div = frozen_divisors(c);
  CHECK(starts_with(r.ablation_failures(with_divisors(r.m.weights, div)),
                    "ablation: KL with all positions 0"));
}
