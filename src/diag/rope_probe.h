#pragma once
// rope-probe: does a model's positional encoding (RoPE) work, and is its RoPE configuration
// the one its weights were trained with? Four probes, all through the Forward pass that
// serves `run` (so they test the engine's kernels too):
//
//   shift     the same prompt with RoPE positions starting at 0 and at offsets o (a RoPE
//             shift through the observer hook, RopePositionMap; no extra tokens are run).
//             RoPE scores depend on position differences only, so the logits must match up
//             to rounding: KL(P_0 || P_o) per position (mean, max) and max |logit_0 -
//             logit_o|. Beside it,
//             an analytic table of how float32 angle arithmetic (what many implementations
//             do) drifts from float64 angles (what llmctl does) as the position grows.
//   ablation  positions all zero against normal (mean KL over the prompt), and the prompt's
//             middle tokens shuffled (KL at the last position, with and without positions).
//             Working position encoding: a large KL.
//   distance  fact sentence, N filler tokens, cue; probability of the expected completion's
//             first token and KL against N = 0, for N = 0, 1, 2, 4 ... up to the context;
//             again under --rope-theta / --rope-scale overrides when given.
//   sweep     mean negative log-likelihood of a reference text under the configured RoPE and
//             under variants (base x10, /10, the other pair layout, linear scaling on/off).
//             The configured one should fit best.
//
// KL is in nats between next-token distributions (softmax of the logits in double).
//
// Precision: the probes run on the backend they are given; `llmctl rope-probe` gives them one
// with f32 activations and an f32 KV cache (BackendChoice::float_activations), because the
// shift probe looks for rounding-sized differences. Measured on SmolLM2-135M Q4_1 (56-token
// prompt, offset 1024): the CPU fast path's int8 activations give max KL 0.013 and
// |dlogit| 1.3 (a 1-ulp change of q or k flips int8 roundings downstream, 30 layers deep),
// f32 activations 1.6e-11 and 3.3e-5, the scalar reference 7.4e-11 and 8.5e-5; Gemma 3 270M
// Q4_K_M: 2.4e-4 / 0.13 against 9.5e-12 / 2.7e-5. The thresholds (rope_probe_check.h) sit
// four orders of magnitude (KL) and ~30x (dlogit) above the f32 figures.
//
// Layers: a model with a sliding-window pattern and a local RoPE base (Gemma 3: 5 of 6 layers
// windowed with base 10000, every 6th global with the file's base and scaling; arch.h
// layer_rope_base) has two RoPE groups (rope_layer_groups). The shift and ablation probes
// move every layer's positions at once; the sweep varies each group's base on its own and
// names the group ("global base x10", "local base /10"); the angle table has rows per base.
// The shift offset moves RoPE positions only, never the cache positions the window is counted
// in, so a window sees the same keys at every offset (a prompt longer than the window is
// shift invariant too; tested).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/config.h"
#include "model/weights.h"
#include "tokenizer/tokenizer.h"

namespace llmctl {

// The built-in texts (rope_probe_text.cpp).
extern const char* const kRopeProbePrompt;     // shift and ablation
extern const char* const kRopeProbeReference;  // sweep
extern const char* const kRopeProbeFact;       // distance: fact, filler, cue, expected
extern const char* const kRopeProbeFiller;
extern const char* const kRopeProbeCue;
extern const char* const kRopeProbeExpected;

// Which probes run (--probes); a report holds only theirs and the checks only judge them.
struct RopeProbeSet {
  bool shift = true, ablation = true, distance = true, sweep = true;
};

struct RopeProbeOptions {
  RopeProbeSet probes;
  std::vector<int64_t> offsets;  // empty: default_shift_offsets(config)
  std::string prompt = kRopeProbePrompt;
  std::string reference = kRopeProbeReference;
  std::string fact = kRopeProbeFact;
  std::string filler = kRopeProbeFiller;
  std::string cue = kRopeProbeCue;
  std::string expected = kRopeProbeExpected;
  int64_t distance_ctx = 0;  // longest distance sequence in tokens; 0: n_ctx_train
  // Overrides for an extra distance curve (--rope-theta, --rope-scale linear:F).
  std::optional<double> theta;
  std::optional<double> linear_scale;  // factor F: freq_scale = 1 / F
  uint64_t seed = 1;                   // the ablation's shuffle
};

// -- results ----------------------------------------------------------------------------
struct ShiftRow {
  int64_t offset = 0;
  double kl_mean = 0, kl_max = 0;  // over the prompt's positions
  double max_dlogit = 0;           // max |logit_0 - logit_offset| over positions and tokens
};

// Layers that share one RoPE configuration (and attention window).
struct RopeLayerGroup {
  std::vector<int64_t> layers;
  int32_t window = 0;  // 0: global attention
  double freq_base = 0;
  double freq_scale = 1;
  bool local = false;  // the windowed layers of a pattern with its own local base
};
// The groups in order of their first layer: one for most models, two for Gemma 3 (global and
// local layers; arch.h layer_rope_base, layer_rope_freq_scale, layer_window).
std::vector<RopeLayerGroup> rope_layer_groups(const ModelConfig& c);
// Whether the model has a separate local RoPE base on some layers (then two groups differ).
bool has_local_rope_base(const ModelConfig& c);
// "normal pairs, base 10000, scale 1" or, with a local base, "neox pairs, global base 1e+06,
// local base 10000, scale 1".
std::string describe_rope(const ModelConfig& c);

// Float32 against float64 RoPE angles at one position (analytic, every pair).
struct AngleRow {
  double freq_base = 0;  // the group's base (rope_layer_groups)
  int64_t pos = 0;
  double f32_angle_err = 0;  // max |theta_f32 - theta| (radians)
  double f32_rot_err = 0;    // max |cos, sin of theta_f32 - of theta|
  double f64_rot_err = 0;    // llmctl: max |float(cos theta) - cos theta| (rounding only)
};

struct AblationResult {
  double kl_zero_mean = 0;           // normal vs all positions 0, mean over the prompt
  double kl_shuffled_last = 0;       // normal vs middle tokens shuffled, last position
  double kl_zero_shuffled_last = 0;  // same, both with all positions 0
};

struct DistancePoint {
  int64_t n_filler = 0;
  int64_t n_tokens = 0;  // whole sequence
  double p_expected = 0;
  int64_t rank = 0;  // of the expected token (0 = most likely)
  double kl_vs_0 = 0;
};

struct DistanceCurve {
  std::string label;  // "configured", "theta=..., linear x F"
  std::vector<DistancePoint> points;
};

struct DistanceResult {
  int32_t expected_id = 0;
  std::string expected_piece;
  std::vector<DistanceCurve> curves;
};

struct SweepRow {
  std::string name;    // "configured", "base x10" ...
  std::string detail;  // "normal, base 10000, scale 1"
  double nll = 0;      // mean per predicted token (nats)
  bool configured = false;
};

struct SweepResult {
  int64_t n_tokens = 0;  // tokens predicted
  std::vector<SweepRow> rows;
};

struct RopeProbeReport {
  std::string model;
  std::string backend;
  ModelConfig config;
  RopeProbeSet probes;  // which ran; the others' members stay empty
  int64_t prompt_tokens = 0;
  std::vector<ShiftRow> shift;  // offset 0 first: a second run, KL exactly 0 when deterministic
  std::vector<AngleRow> angles;
  AblationResult ablation;
  DistanceResult distance;
  SweepResult sweep;
};

// 1k, 8k, 32k and the training context times 1 and 4, sorted, without duplicates.
std::vector<int64_t> default_shift_offsets(const ModelConfig& config);
// Positions of the angle table: powers of 4 from 2^8 to 2^30 and every offset's last position,
// for each distinct base of rope_layer_groups (rows by base, then position).
std::vector<AngleRow> angle_precision(const ModelConfig& config, std::vector<int64_t> positions);
// "shift,sweep" -> the set; throws Error naming a word that is not a probe, or an empty list.
RopeProbeSet parse_rope_probe_set(const std::string& list);

// The probes. `backend` runs every forward pass; `tok` encodes the texts. Throw Error for an
// offset outside what 32-bit positions allow, a text that encodes to too few tokens, or an
// expected completion that does not start a new token after the cue.
std::vector<ShiftRow> probe_shift(const ModelConfig& c, const ModelWeights& w, Backend& b,
                                  const std::vector<int32_t>& ids,
                                  const std::vector<int64_t>& offsets);
AblationResult probe_ablation(const ModelConfig& c, const ModelWeights& w, Backend& b,
                              const std::vector<int32_t>& ids, uint64_t seed);
DistanceResult probe_distance(const ModelConfig& c, const ModelWeights& w, Backend& b,
                              const Tokenizer& tok, const RopeProbeOptions& opt);
SweepResult probe_sweep(const ModelConfig& c, const ModelWeights& w, Backend& b,
                        const std::vector<int32_t>& ids);

// Everything, as `llmctl rope-probe` runs it.
RopeProbeReport run_rope_probe(const std::string& model_path, const ModelConfig& c,
                               const ModelWeights& w, Backend& b, const Tokenizer& tok,
                               const RopeProbeOptions& opt);

}  // namespace llmctl
