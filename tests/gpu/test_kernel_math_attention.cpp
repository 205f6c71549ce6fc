// kernels/attention_math.cuh on the CPU (no GPU needed): the paged-attention kernel's online
// softmax, its warp merge and its score statistics, driven the way the kernel drives them
// (4 warps, position j to warp j % 4), against a direct two-pass computation in double:
//   out = sum_j softmax(s)_j v_j,  max/min/sum/sum of squares of the finite scores,
//   NaN/Inf counts, entropy -sum a ln a (NaN when the softmax is).
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/attention_math.cuh"

namespace {

using llmctl::cuda::ScoreStats;
constexpr int kWarps = 4;  // as kernels/attention_paged.cu

struct Result {
  float out;  // sum_j a_j v_j for one scalar "V" per position
  float stats[llmctl::cuda::kAttnFieldsPerHead];
};

// The kernel's arithmetic on one (token, head) whose scores are s and whose V rows are the
// scalars v.
Result kernel_math(const std::vector<float>& s, const std::vector<float>& v) {
  float m[kWarps], l[kWarps], acc[kWarps];
  ScoreStats st[kWarps];
  for (int w = 0; w < kWarps; ++w) {
    m[w] = -INFINITY;
    l[w] = 0.0f;
    acc[w] = 0.0f;
    st[w] = ScoreStats::empty();
    for (size_t j = static_cast<size_t>(w); j < s.size(); j += kWarps) {
      st[w].add_raw(s[j]);  // no soft-cap here: the raw scores are the scores
      const auto step = llmctl::cuda::online_softmax_step<true>(s[j], m[w], l[w], st[w]);
      acc[w] = fmaf(step.p, v[j], acc[w] * step.c);
    }
  }
  float big_m = 0.0f, factor[kWarps];
  const float total = llmctl::cuda::merge_softmax(m, l, kWarps, big_m, factor);
  Result r{};
  float sum = 0.0f;
  for (int w = 0; w < kWarps; ++w) sum = fmaf(acc[w], factor[w], sum);
  r.out = sum * (1.0f / total);
  llmctl::cuda::write_attention_stats(st, m, l, kWarps, big_m, total,
                                      static_cast<int64_t>(s.size()), r.stats);
  return r;
}

// The definition, in double, two passes.
Result reference(const std::vector<float>& s, const std::vector<float>& v) {
  using llmctl::cuda::AttentionStatField;
  Result r{};
  double mx = -INFINITY, mn = INFINITY, sum = 0, sq = 0, n_nan = 0, n_inf = 0;
  double top = -INFINITY;
  bool softmax_nan = false;
  for (const float x : s) {
    if (std::isnan(x)) {
      ++n_nan;
      softmax_nan = true;
    } else if (std::isinf(x)) {
      ++n_inf;
      softmax_nan = softmax_nan || x > 0;  // exp(inf - inf)
    } else {
      mx = std::max(mx, double{x});
      mn = std::min(mn, double{x});
      sum += double{x};
      sq += double{x} * double{x};
    }
    if (!std::isnan(x)) top = std::max(top, double{x});
  }
  softmax_nan = softmax_nan || std::isinf(top) && top < 0;  // every score -inf
  double z = 0, h = 0, out = 0;
  if (!softmax_nan) {
    for (const float x : s) z += std::exp(double{x} - top);
    for (size_t j = 0; j < s.size(); ++j) {
      const double a = std::exp(double{s[j]} - top) / z;
      if (a > 0) h -= a * std::log(a);
      out += a * double{v[j]};
    }
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  r.out = static_cast<float>(softmax_nan ? nan : out);
  r.stats[llmctl::cuda::kAttnFieldMax] = static_cast<float>(mx);
  r.stats[llmctl::cuda::kAttnFieldMin] = static_cast<float>(mn);
  r.stats[llmctl::cuda::kAttnFieldSum] = static_cast<float>(sum);
  r.stats[llmctl::cuda::kAttnFieldSumSq] = static_cast<float>(sq);
  r.stats[llmctl::cuda::kAttnFieldNan] = static_cast<float>(n_nan);
  r.stats[llmctl::cuda::kAttnFieldInf] = static_cast<float>(n_inf);
  r.stats[llmctl::cuda::kAttnFieldEntropy] = static_cast<float>(softmax_nan ? nan : h);
  r.stats[llmctl::cuda::kAttnFieldCount] = static_cast<float>(s.size());
  r.stats[llmctl::cuda::kAttnFieldRawMax] = static_cast<float>(mx);
  r.stats[llmctl::cuda::kAttnFieldRawMin] = static_cast<float>(mn);
  r.stats[llmctl::cuda::kAttnFieldRawNonFinite] = static_cast<float>(n_nan + n_inf);
  return r;
}

// Both NaN, both the same infinity, or within tol * (1 + |want|).
bool close(float got, float want, double tol) {
  if (std::isnan(got) || std::isnan(want)) return std::isnan(got) && std::isnan(want);
  if (std::isinf(got) || std::isinf(want)) return got == want;
  return std::fabs(double{got} - double{want}) <= tol * (1.0 + std::fabs(double{want}));
}

}  // namespace

TEST_CASE("attention kernel math: online softmax, merge and statistics as the definition",
          "[cpu][cuda]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<std::vector<float>> cases = {
      {0.5f},                                // one score: entropy 0
      {1.0f, 1.0f},                          // uniform over 2: ln 2
      {0.0f, 1.0f, -2.0f, 3.0f, 0.25f},      // warps 0 sees positions 0 and 4
      {-200.0f, 0.0f, 1.0f},                 // an underflowing p (0 ln 0 = 0)
      {1.0f, -inf, 2.0f, -inf, 0.5f},        // -inf scores: counted, weight 0, finite result
      {1.0f, nan, 2.0f},                     // a NaN score: NaN softmax
      {1.0f, 2.0f, inf, 0.0f, 3.0f, 1.0f},   // +inf: NaN softmax
      {-inf, -inf},                          // every score -inf: NaN softmax
      {2.0f, -inf, 1.0f, 0.0f, 3.0f, 0.5f},  // warp 1: -inf first, then a finite score
      {-inf, nan, 1.0f},                     // NaN after -inf still poisons the softmax
  };
  std::vector<float> ramp;  // 70 positions, several rescalings of every warp's running max
  for (int j = 0; j < 70; ++j) ramp.push_back(static_cast<float>((j * 37) % 23) * 0.3f - 3.0f);
  cases.push_back(ramp);
  for (const auto& s : cases) {
    std::vector<float> v(s.size());
    for (size_t j = 0; j < v.size(); ++j) v[j] = static_cast<float>(j % 7) * 0.25f - 0.5f;
    CAPTURE(s);
    const Result got = kernel_math(s, v), want = reference(s, v);
    // f32 online arithmetic against f64 two-pass: ~1e-7 relative, 1e-5 leaves room.
    CHECK(close(got.out, want.out, 1e-5));
    for (int f = 0; f < llmctl::cuda::kAttnFieldsPerHead; ++f) {
      CAPTURE(f);
      CHECK(close(got.stats[f], want.stats[f], 1e-5));
    }
  }
}
