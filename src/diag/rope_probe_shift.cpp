// rope-probe's shift-invariance and position-ablation probes, and the float32 angle table
// (rope_probe.h).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "diag/rope_probe.h"
#include "diag/rope_probe_runner.h"

namespace llmctl {

namespace {

// Mean and max KL and max |dlogit| between two (n, n_vocab) logits arrays.
ShiftRow compare_rows(const std::vector<float>& a, const std::vector<float>& b, int64_t n_vocab) {
  ShiftRow r;
  const auto n = static_cast<int64_t>(a.size()) / n_vocab;
  for (int64_t i = 0; i < n; ++i) {
    const float* pa = a.data() + i * n_vocab;
    const float* pb = b.data() + i * n_vocab;
    const double kl = kl_nats(pa, pb, n_vocab);
    r.kl_mean += kl / static_cast<double>(n);
    r.kl_max = std::max(r.kl_max, kl);
    r.max_dlogit = std::max(r.max_dlogit, max_abs_diff(pa, pb, n_vocab));
  }
  return r;
}

// KL between the last rows of two logits arrays.
double kl_last(const std::vector<float>& a, const std::vector<float>& b, int64_t n_vocab) {
  return kl_nats(a.data() + a.size() - static_cast<size_t>(n_vocab),
                 b.data() + b.size() - static_cast<size_t>(n_vocab), n_vocab);
}

// ids with ids[1 .. n-2] permuted (Fisher-Yates on a splitmix64 stream, the same on every
// platform, so a --baseline stays comparable); BOS and the last token stay.
std::vector<int32_t> shuffled_middle(std::vector<int32_t> ids, uint64_t seed) {
  uint64_t x = seed;
  const auto next = [&x] {
    uint64_t z = (x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  };
  for (size_t i = ids.size() - 2; i > 1; --i) {
    const size_t j = 1 + static_cast<size_t>(next() % i);  // j in [1, i]
    std::swap(ids[i], ids[j]);
  }
  return ids;
}

}  // namespace

std::vector<int64_t> default_shift_offsets(const ModelConfig& config) {
  std::vector<int64_t> v = {1024, 8192, 32768, config.n_ctx_train, 4 * config.n_ctx_train};
  v.erase(std::remove_if(v.begin(), v.end(), [](int64_t o) { return o <= 0; }), v.end());
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

std::vector<AngleRow> angle_precision(const ModelConfig& c, std::vector<int64_t> positions) {
  for (int k = 8; k <= 30; k += 2) positions.push_back(int64_t{1} << k);
  std::sort(positions.begin(), positions.end());
  positions.erase(std::unique(positions.begin(), positions.end()), positions.end());
  std::vector<std::pair<double, double>> bases;  // (base, scale) of each group, once
  for (const RopeLayerGroup& g : rope_layer_groups(c))
    if (std::find(bases.begin(), bases.end(), std::pair(g.freq_base, g.freq_scale)) == bases.end())
      bases.emplace_back(g.freq_base, g.freq_scale);
  if (bases.empty()) bases.emplace_back(c.rope_freq_base, c.rope_freq_scale);  // no layers
  const int64_t n_pairs = c.n_rot / 2;
  std::vector<AngleRow> rows;
  for (const auto& [base, scale] : bases) {
    // float32 angles as ggml computes them: theta_scale = base^(-2/n_rot) in float, the pair's
    // angle p * theta_scale^i by repeated float multiplication, times freq_scale.
    const float theta_scale =
        std::pow(static_cast<float>(base), -2.0f / static_cast<float>(c.n_rot));
    for (const int64_t p : positions) {
      AngleRow r;
      r.freq_base = base;
      r.pos = p;
      float theta_base = static_cast<float>(p);
      for (int64_t i = 0; i < n_pairs; ++i) {
        const double exact = rope_theta(p, i, c.n_rot, base, scale);
        const double f32 = static_cast<double>(static_cast<float>(scale) * theta_base);
        theta_base *= theta_scale;
        r.f32_angle_err = std::max(r.f32_angle_err, std::fabs(f32 - exact));
        r.f32_rot_err = std::max({r.f32_rot_err, std::fabs(std::cos(f32) - std::cos(exact)),
                                  std::fabs(std::sin(f32) - std::sin(exact))});
        // llmctl's path: the double angle, cos/sin rounded to float once.
        const double cr = static_cast<double>(static_cast<float>(std::cos(exact)));
        const double sr = static_cast<double>(static_cast<float>(std::sin(exact)));
        r.f64_rot_err = std::max(
            {r.f64_rot_err, std::fabs(cr - std::cos(exact)), std::fabs(sr - std::sin(exact))});
      }
      rows.push_back(r);
    }
  }
  return rows;
}

std::vector<ShiftRow> probe_shift(const ModelConfig& c, const ModelWeights& w, Backend& b,
                                  const std::vector<int32_t>& ids,
                                  const std::vector<int64_t>& offsets) {
  const auto n = static_cast<int64_t>(ids.size());
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  for (const int64_t o : offsets)
    if (o < 0 || o > kMax - n)
      throw Error(
          fmt::format("rope-probe: offset {} is outside [0, {}] (positions offset .. "
                      "offset + {} must fit in 32 bits)",
                      o, kMax - n, n - 1));
  RopeRunner run(c, w, b, n);
  const std::vector<float> base = run.logits(ids, RopePositions{}, true);
  std::vector<ShiftRow> rows;
  // Offset 0 first: a second run of the same thing, which must give KL exactly 0.
  std::vector<int64_t> all = {0};
  for (const int64_t o : offsets)
    if (o != 0) all.push_back(o);
  for (const int64_t o : all) {
    ShiftRow r = compare_rows(base, run.logits(ids, RopePositions{o, false}, true), c.n_vocab);
    r.offset = o;
    rows.push_back(r);
  }
  return rows;
}

AblationResult probe_ablation(const ModelConfig& c, const ModelWeights& w, Backend& b,
                              const std::vector<int32_t>& ids, uint64_t seed) {
  const auto n = static_cast<int64_t>(ids.size());
  if (n < 4) throw Error(fmt::format("rope-probe: the prompt has {} tokens, at least 4 needed", n));
  RopeRunner run(c, w, b, n);
  const RopePositions zero{0, true};
  const std::vector<int32_t> shuffled = shuffled_middle(ids, seed);
  const std::vector<float> normal = run.logits(ids, RopePositions{}, true);
  const std::vector<float> zeroed = run.logits(ids, zero, true);
  AblationResult r;
  r.kl_zero_mean = compare_rows(normal, zeroed, c.n_vocab).kl_mean;
  r.kl_shuffled_last = kl_last(normal, run.logits(shuffled, RopePositions{}, false), c.n_vocab);
  r.kl_zero_shuffled_last = kl_last(zeroed, run.logits(shuffled, zero, false), c.n_vocab);
  return r;
}

}  // namespace llmctl
