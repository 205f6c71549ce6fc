// Sampler and Rng (src/sampler/): the documented order of steps, each step against a
// hand-computed example, reproducibility from the seed, and the empirical distribution.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "sampler/rng.h"
#include "sampler/sampler.h"

using Catch::Matchers::Contains;
using llmctl::Rng;
using llmctl::Sampler;
using llmctl::SamplerParams;

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Every cut and penalty off; only what a test sets is on.
SamplerParams plain(float temperature, uint64_t seed = 1) {
  SamplerParams p;
  p.temperature = temperature;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.repeat_penalty = 1.0f;
  p.presence_penalty = 0.0f;
  p.frequency_penalty = 0.0f;
  p.seed = seed;
  return p;
}

int32_t n_of(const std::vector<float>& v) { return static_cast<int32_t>(v.size()); }

// softmax in double, for expected values.
std::vector<double> softmax_ref(const std::vector<double>& l) {
  double m = l[0];
  for (const double x : l) m = std::max(m, x);
  std::vector<double> e(l.size());
  double s = 0.0;
  for (size_t i = 0; i < l.size(); ++i) s += (e[i] = std::exp(l[i] - m));
  for (double& x : e) x /= s;
  return e;
}

// A fixed, irregular logit vector without ties.
std::vector<float> irregular_logits(int32_t n) {
  std::vector<float> l(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i)
    l[static_cast<size_t>(i)] = static_cast<float>(std::sin(0.7 * i + 0.3) * 3.0 + 0.01 * i);
  return l;
}

// Checks probabilities() gives exactly these ids, in this order, with these probabilities.
void check_probs(Sampler& s, const std::vector<float>& logits, const std::vector<int32_t>& ids,
                 const std::vector<double>& probs) {
  const auto got = s.probabilities(logits.data(), n_of(logits));
  REQUIRE(got.size() == ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    INFO("candidate " << i);
    CHECK(got[i].id == ids[i]);
    CHECK(static_cast<double>(got[i].p) == Approx(probs[i]).epsilon(1e-5));
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// Rng
// ---------------------------------------------------------------------------
TEST_CASE("Rng: xoshiro256** seeded by splitmix64 gives the reference outputs", "[cpu]") {
  // From an independent Python transcription of the published algorithms (state for seed 0
  // is splitmix64's well-known first outputs e220a8397b1dcdaf, 6e789e6aa1b965f4, ...).
  Rng r0(0);
  for (const uint64_t want : {0x99ec5f36cb75f2b4ull, 0xbf6e1f784956452aull, 0x1a5f849d4933e6e0ull,
                              0x6aa594f1262d2d2cull, 0xbba5ad4a1f842e59ull})
    CHECK(r0.next_u64() == want);
  Rng r42(42);
  for (const uint64_t want : {0x15780b2e0c2ec716ull, 0x6104d9866d113a7eull, 0xae17533239e499a1ull,
                              0xecb8ad4703b360a1ull, 0xfde6dc7fe2ec5e64ull})
    CHECK(r42.next_u64() == want);
  // The floats are the top bits, scaled exactly.
  Rng a(7), b(7);
  for (int i = 0; i < 1000; ++i) {
    const uint64_t x = a.next_u64();
    const double d = b.uniform_double();
    CHECK(d == static_cast<double>(x >> 11) / 9007199254740992.0);
    CHECK(d >= 0.0);
    CHECK(d < 1.0);
  }
  Rng c(7), e(7);
  for (int i = 0; i < 1000; ++i) {
    const uint64_t x = c.next_u64();
    const float f = e.uniform_float();
    CHECK(f == static_cast<float>(x >> 40) / 16777216.0f);
    CHECK(f < 1.0f);
  }
}

// ---------------------------------------------------------------------------
// Greedy and reproducibility
// ---------------------------------------------------------------------------
TEST_CASE("greedy (temperature 0) is the argmax, ties to the lowest id", "[cpu]") {
  Sampler s(plain(0.0f));
  const std::vector<float> a = {1.0f, 3.0f, 3.0f, 2.0f};
  CHECK(s.sample(a.data(), n_of(a)) == 1);
  const std::vector<float> b = {kNegInf, -5.0f, -5.0f, kNegInf};
  CHECK(s.sample(b.data(), n_of(b)) == 1);
  const std::vector<float> c = {7.0f, 7.0f};
  CHECK(s.sample(c.data(), n_of(c)) == 0);
  const auto l = irregular_logits(5000);
  int32_t best = 0;
  for (int32_t i = 1; i < 5000; ++i)
    if (l[static_cast<size_t>(i)] > l[static_cast<size_t>(best)]) best = i;
  CHECK(s.sample(l.data(), 5000) == best);
  const auto probs = s.probabilities(l.data(), 5000);
  REQUIRE(probs.size() == 1);
  CHECK(probs[0].id == best);
  CHECK(probs[0].p == 1.0f);
}

TEST_CASE("the same seed gives the same 1000 draws, another seed does not", "[cpu]") {
  const auto l = irregular_logits(50);
  auto draws = [&](uint64_t seed, int32_t top_k, float top_p, float min_p) {
    SamplerParams p = plain(1.0f, seed);
    p.top_k = top_k;
    p.top_p = top_p;
    p.min_p = min_p;
    Sampler s(p);
    std::vector<int32_t> out;
    for (int i = 0; i < 1000; ++i) out.push_back(s.sample(l.data(), n_of(l)));
    return out;
  };
  for (const auto& cut : {std::vector<float>{0, 1, 0}, std::vector<float>{20, 0.9f, 0.02f}}) {
    const auto k = static_cast<int32_t>(cut[0]);
    const auto a = draws(1234, k, cut[1], cut[2]);
    CHECK(a == draws(1234, k, cut[1], cut[2]));
    CHECK(a != draws(1235, k, cut[1], cut[2]));
  }
  // reset() restarts the RNG from the seed.
  Sampler s(plain(1.0f, 99));
  std::vector<int32_t> first, second;
  for (int i = 0; i < 100; ++i) first.push_back(s.sample(l.data(), n_of(l)));
  s.reset();
  for (int i = 0; i < 100; ++i) second.push_back(s.sample(l.data(), n_of(l)));
  CHECK(first == second);
}

TEST_CASE("200k draws at temperature 1 follow the softmax (chi-square)", "[cpu]") {
  // 12 tokens, the rarest with p ~ 0.003 (about 600 expected draws: every cell far above the
  // chi-square rule of thumb of 5). 11 degrees of freedom; the critical value at alpha = 0.001
  // is 31.26. The seed is fixed, so the test is deterministic: a pass proves nothing about
  // other seeds, but a biased draw (off by one candidate, wrong renormalization, temperature
  // applied twice) gives chi-square in the thousands.
  const std::vector<double> ld = {0.0, 0.5, -1.0, 2.0, 1.2, -2.5, 0.3, 1.9, -0.7, 0.8, 1.5, -1.8};
  std::vector<float> l;
  for (const double x : ld) l.push_back(static_cast<float>(x));
  std::vector<double> lf(l.begin(), l.end());  // the float logits the sampler sees
  const auto p = softmax_ref(lf);
  Sampler s(plain(1.0f, 20240531));
  std::vector<int64_t> count(l.size(), 0);
  const int n = 200000;
  for (int i = 0; i < n; ++i) ++count[static_cast<size_t>(s.sample(l.data(), n_of(l)))];
  double chi2 = 0.0;
  for (size_t i = 0; i < l.size(); ++i) {
    const double expected = n * p[i];
    const double d = static_cast<double>(count[i]) - expected;
    chi2 += d * d / expected;
  }
  INFO("chi-square = " << chi2);
  CHECK(chi2 < 31.26);
}

// ---------------------------------------------------------------------------
// One step at a time, hand-computed
// ---------------------------------------------------------------------------
TEST_CASE("temperature scales the logits before the softmax", "[cpu]") {
  const std::vector<float> l = {2.0f, 1.0f, 0.0f};
  // softmax([4, 2, 0]) and softmax([1, 0.5, 0]), by hand (double precision).
  Sampler cold(plain(0.5f));
  check_probs(cold, l, {0, 1, 2}, {0.8668133321973347, 0.11731042782619835, 0.015876239976466762});
  Sampler hot(plain(2.0f));
  check_probs(hot, l, {0, 1, 2}, {0.506480391055654, 0.3071958857184984, 0.1863237232258476});
  // A tiny temperature does not overflow l / T: it is greedy in all but name.
  Sampler tiny(plain(1e-30f));
  check_probs(tiny, l, {0}, {1.0});
}

TEST_CASE("top-k = 1 equals greedy at any temperature", "[cpu]") {
  const auto l = irregular_logits(1000);
  Sampler greedy(plain(0.0f));
  const int32_t best = greedy.sample(l.data(), n_of(l));
  for (const float t : {0.1f, 1.0f, 5.0f, 100.0f}) {
    SamplerParams p = plain(t, 5);
    p.top_k = 1;
    Sampler s(p);
    for (int i = 0; i < 100; ++i) CHECK(s.sample(l.data(), n_of(l)) == best);
  }
}

TEST_CASE("top-k keeps the k largest logits, ties to the lower id", "[cpu]") {
  SamplerParams p = plain(1.0f);
  p.top_k = 3;
  Sampler s(p);
  const std::vector<float> l = {0.0f, 2.0f, 1.0f, 2.0f, 1.0f, -1.0f};
  const auto got = s.probabilities(l.data(), n_of(l));
  REQUIRE(got.size() == 3);
  CHECK(got[0].id == 1);
  CHECK(got[1].id == 3);
  CHECK(got[2].id == 2);  // 2 and 4 tie at 1.0: the lower id stays
  // top_k >= n_vocab keeps everything.
  p.top_k = 100;
  Sampler all(p);
  CHECK(all.probabilities(l.data(), n_of(l)).size() == l.size());
}

TEST_CASE("top-p keeps the smallest set with cumulative probability >= p", "[cpu]") {
  // Logits log(p) give exactly these probabilities at temperature 1.
  const std::vector<double> p5 = {0.05, 0.3, 0.4, 0.1, 0.15};
  std::vector<float> l;
  for (const double x : p5) l.push_back(static_cast<float>(std::log(x)));
  auto with_top_p = [](float top_p) {
    SamplerParams p = plain(1.0f);
    p.top_p = top_p;
    return Sampler(p);
  };
  // Descending: 0.4 (id 2), 0.3 (id 1), 0.15 (id 4), 0.1 (id 3), 0.05 (id 0).
  // Cumulative: 0.4, 0.7, 0.85, 0.95, 1.0.
  Sampler a = with_top_p(0.8f);  // 0.7 < 0.8 <= 0.85: three tokens, renormalized by 0.85
  check_probs(a, l, {2, 1, 4}, {0.4 / 0.85, 0.3 / 0.85, 0.15 / 0.85});
  Sampler b = with_top_p(0.65f);  // 0.4 < 0.65 <= 0.7: two tokens
  check_probs(b, l, {2, 1}, {0.4 / 0.7, 0.3 / 0.7});
  Sampler c = with_top_p(0.3f);  // the first token alone already has 0.4
  check_probs(c, l, {2}, {1.0});
  Sampler d = with_top_p(1.0f);  // off: id order, untouched
  check_probs(d, l, {0, 1, 2, 3, 4}, p5);
  // Draws come only from the kept set.
  for (int i = 0; i < 2000; ++i) {
    const int32_t id = a.sample(l.data(), n_of(l));
    CHECK((id == 2 || id == 1 || id == 4));
  }
}

TEST_CASE("min-p drops tokens below min_p * p_max", "[cpu]") {
  const std::vector<double> p5 = {0.05, 0.3, 0.4, 0.1, 0.15};
  std::vector<float> l;
  for (const double x : p5) l.push_back(static_cast<float>(std::log(x)));
  auto with_min_p = [](float min_p) {
    SamplerParams p = plain(1.0f);
    p.min_p = min_p;
    return Sampler(p);
  };
  Sampler a = with_min_p(0.3f);  // threshold 0.12: 0.4, 0.3, 0.15 stay (id order: no sort)
  check_probs(a, l, {1, 2, 4}, {0.3 / 0.85, 0.4 / 0.85, 0.15 / 0.85});
  Sampler b = with_min_p(0.5f);  // threshold 0.2: 0.4 and 0.3 stay
  check_probs(b, l, {1, 2}, {0.3 / 0.7, 0.4 / 0.7});
  Sampler c = with_min_p(1.0f);  // only p_max
  check_probs(c, l, {2}, {1.0});
}

TEST_CASE("repetition, presence and frequency penalties as llama.cpp defines them", "[cpu]") {
  const std::vector<float> l = {2.0f, -1.0f, 0.5f, 3.0f, 0.0f};
  // History: id 0 twice, ids 1, 2 and 4 once; id 3 never.
  auto penalized = [&](float repeat, float presence, float frequency, int32_t last_n) {
    SamplerParams p = plain(1.0f);
    p.repeat_penalty = repeat;
    p.presence_penalty = presence;
    p.frequency_penalty = frequency;
    p.repeat_last_n = last_n;
    Sampler s(p);
    for (const int32_t t : {0, 1, 0, 2, 4}) s.accept(t);
    return s;
  };
  auto expect = [&](Sampler s, const std::vector<double>& logits) {
    check_probs(s, l, {0, 1, 2, 3, 4}, softmax_ref(logits));
  };
  // repetition 2: positive / 2, negative * 2, zero stays zero; id 3 untouched.
  expect(penalized(2.0f, 0.0f, 0.0f, 64), {1.0, -2.0, 0.25, 3.0, 0.0});
  // presence 0.5: once per seen id, however often.
  expect(penalized(1.0f, 0.5f, 0.0f, 64), {1.5, -1.5, 0.0, 3.0, -0.5});
  // frequency 0.5: count * 0.5.
  expect(penalized(1.0f, 0.0f, 0.5f, 64), {1.0, -1.5, 0.0, 3.0, -0.5});
  // all three: repetition first, then subtract.
  expect(penalized(2.0f, 0.25f, 0.5f, 64), {1.0 - 1.25, -2.0 - 0.75, 0.25 - 0.75, 3.0, -0.75});
  // repeat_last_n = 2: only the last two accepted (2 and 4) count.
  expect(penalized(2.0f, 0.0f, 0.0f, 2), {2.0, -1.0, 0.25, 3.0, 0.0});
  // 0: off; -1: the whole history.
  expect(penalized(2.0f, 1.0f, 1.0f, 0), {2.0, -1.0, 0.5, 3.0, 0.0});
  expect(penalized(2.0f, 0.0f, 0.0f, -1), {1.0, -2.0, 0.25, 3.0, 0.0});
  // Greedy sees the penalized logits too.
  SamplerParams g = plain(0.0f);
  g.repeat_penalty = 2.0f;
  Sampler s(g);
  const std::vector<float> two = {5.0f, 4.0f};
  CHECK(s.sample(two.data(), 2) == 0);
  s.accept(0);
  CHECK(s.sample(two.data(), 2) == 1);  // 5 / 2 = 2.5 < 4
}

// ---------------------------------------------------------------------------
// The order
// ---------------------------------------------------------------------------
TEST_CASE("the order: penalties before top-k", "[cpu]") {
  // id 0 leads before the penalty and is last after it. top-k = 1 after the penalties keeps
  // id 1; top-k before them would keep id 0 and always return it.
  const std::vector<float> l = {5.0f, 4.0f, 3.0f};
  SamplerParams p = plain(1.0f, 3);
  p.presence_penalty = 10.0f;
  p.top_k = 1;
  Sampler s(p);
  s.accept(0);
  for (int i = 0; i < 100; ++i) CHECK(s.sample(l.data(), 3) == 1);
  p.top_k = 2;
  Sampler s2(p);
  s2.accept(0);
  const auto got = s2.probabilities(l.data(), 3);
  REQUIRE(got.size() == 2);
  CHECK(got[0].id == 1);
  CHECK(got[1].id == 2);
}

TEST_CASE("the order: temperature before top-p", "[cpu]") {
  // p = (0.5, 0.3, 0.2) at T = 1; top_p = 0.75 keeps two tokens there (0.5 + 0.3 >= 0.75).
  // At T = 3 the distribution is (0.3876, 0.3269, 0.2856): two tokens reach only 0.7145, so
  // all three stay. llama.cpp's order (top-p, then temperature) would keep two.
  const std::vector<float> l = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  SamplerParams p = plain(3.0f);
  p.top_p = 0.75f;
  Sampler s(p);
  check_probs(s, l, {0, 1, 2}, {0.3875610025090992, 0.32688160931326743, 0.2855573881776335});
  p.temperature = 1.0f;
  Sampler s1(p);
  check_probs(s1, l, {0, 1}, {0.5 / 0.8, 0.3 / 0.8});
}

TEST_CASE("the order: top-p before min-p", "[cpu]") {
  // p = (0.4, 0.3, 0.15, 0.1, 0.05), top_p = 0.72, min_p = 0.2 (threshold 0.08 of p_max 0.4).
  // top-p first keeps 0.4, 0.3, 0.15 (cumulative 0.85); min-p keeps all three of those.
  // min-p first would keep four (sum 0.95, renormalized 0.421, 0.316, ...) and top-p would
  // then stop at two (0.421 + 0.316 = 0.737 >= 0.72).
  const std::vector<double> p5 = {0.4, 0.3, 0.15, 0.1, 0.05};
  std::vector<float> l;
  for (const double x : p5) l.push_back(static_cast<float>(std::log(x)));
  SamplerParams p = plain(1.0f);
  p.top_p = 0.72f;
  p.min_p = 0.2f;
  Sampler s(p);
  check_probs(s, l, {0, 1, 2}, {0.4 / 0.85, 0.3 / 0.85, 0.15 / 0.85});
}

// ---------------------------------------------------------------------------
// Errors and edge cases
// ---------------------------------------------------------------------------
TEST_CASE("parameters out of range are errors naming the value", "[cpu]") {
  auto bad = [](auto set) {
    SamplerParams p = plain(1.0f);
    set(p);
    return p;
  };
  CHECK_THROWS_WITH(Sampler(bad([](SamplerParams& p) { p.temperature = -0.5f; })),
                    Contains("temperature") && Contains("got -0.5"));
  CHECK_THROWS_WITH(Sampler(bad([](SamplerParams& p) { p.temperature = std::nanf(""); })),
                    Contains("temperature") && Contains("got nan"));
  CHECK_THROWS_WITH(Sampler(bad([](SamplerParams& p) { p.top_k = -1; })),
                    Contains("top_k must be >= 0") && Contains("got -1"));
  CHECK_THROWS_WITH(Sampler(bad([](SamplerParams& p) { p.top_p = 0.0f; })),
                    Contains("top_p must be in (0, 1]") && Contains("got 0"));
  CHECK_THROWS_WITH(Sampler(bad([](SamplerParams& p) { p.top_p = 1.5f; })),
                    Contains("top_p") && Contains("got 1.5"));
  CHECK_THROWS_WITH(Sampler(bad([](SamplerParams& p) { p.min_p = -0.1f; })),
                    Contains("min_p must be in [0, 1]") && Contains("got -0.1"));
  CHECK_THROWS_WITH(Sampler(bad([](SamplerParams& p) { p.min_p = 2.0f; })),
                    Contains("min_p") && Contains("got 2"));
  CHECK_THROWS_WITH(Sampler(bad([](SamplerParams& p) { p.repeat_penalty = 0.0f; })),
                    Contains("repeat_penalty") && Contains("got 0"));
  CHECK_THROWS_WITH(Sampler(bad([](SamplerParams& p) { p.repeat_last_n = -2; })),
                    Contains("repeat_last_n") && Contains("got -2"));
  CHECK_THROWS_WITH(Sampler(bad([](SamplerParams& p) {
                      p.presence_penalty = std::numeric_limits<float>::infinity();
                    })),
                    Contains("presence_penalty") && Contains("got inf"));
  CHECK_NOTHROW(Sampler(SamplerParams{}));  // the defaults are valid
  CHECK_NOTHROW(Sampler(bad([](SamplerParams& p) {
    p.temperature = 0.0f;
    p.top_p = 1.0f;
    p.min_p = 1.0f;
  })));
}

TEST_CASE("NaN, +inf and all -inf logits are errors, not a silent pick", "[cpu]") {
  Sampler s(plain(1.0f));
  Sampler g(plain(0.0f));
  std::vector<float> l = {0.0f, 1.0f, std::nanf(""), 2.0f, std::nanf("")};
  CHECK_THROWS_WITH(s.sample(l.data(), n_of(l)), "sampler: logits contain NaN at id 2");
  CHECK_THROWS_WITH(g.sample(l.data(), n_of(l)), "sampler: logits contain NaN at id 2");
  l[2] = std::numeric_limits<float>::infinity();
  CHECK_THROWS_WITH(s.sample(l.data(), n_of(l)), "sampler: logits contain +inf at id 2");
  const std::vector<float> none = {kNegInf, kNegInf};
  CHECK_THROWS_WITH(s.sample(none.data(), 2), Contains("all 2 logits are -inf"));
  CHECK_THROWS_WITH(s.sample(none.data(), 0), Contains("n_vocab must be > 0"));
}

TEST_CASE("history ids are checked against the vocabulary", "[cpu]") {
  SamplerParams p = plain(1.0f);
  p.repeat_penalty = 1.1f;
  Sampler s(p);
  CHECK_THROWS_WITH(s.accept(-3), Contains("accepted token id -3 is negative"));
  s.accept(7);
  const std::vector<float> l = {0.0f, 1.0f};
  CHECK_THROWS_WITH(s.sample(l.data(), 2),
                    Contains("token id 7") && Contains("outside the vocabulary (n_vocab 2)"));
}

TEST_CASE("masked (-inf) tokens are never drawn", "[cpu]") {
  const std::vector<float> l = {0.0f, kNegInf, 0.0f, kNegInf};
  Sampler s(plain(1.0f, 11));
  for (int i = 0; i < 1000; ++i) {
    const int32_t id = s.sample(l.data(), 4);
    CHECK((id == 0 || id == 2));
  }
  check_probs(s, l, {0, 2}, {0.5, 0.5});
}

TEST_CASE("a 128k vocabulary with top-k, top-p and min-p", "[cpu]") {
  const int32_t n = 128256;
  const auto l = irregular_logits(n);
  SamplerParams p = plain(0.8f, 42);
  p.top_k = 40;
  p.top_p = 0.95f;
  p.min_p = 0.05f;
  Sampler s(p);
  const auto probs = s.probabilities(l.data(), n);
  REQUIRE(!probs.empty());
  CHECK(probs.size() <= 40);
  double sum = 0.0;
  for (size_t i = 0; i < probs.size(); ++i) {
    sum += static_cast<double>(probs[i].p);
    if (i > 0) CHECK(probs[i].p <= probs[i - 1].p);
  }
  CHECK(sum == Approx(1.0).epsilon(1e-6));
  for (int i = 0; i < 200; ++i) {
    const int32_t id = s.sample(l.data(), n);
    bool kept = false;
    for (const auto& tp : probs) kept = kept || tp.id == id;
    CHECK(kept);
  }
}

TEST_CASE("top-p without top-k: a nucleus larger than the first sorted prefix", "[cpu]") {
  // 1000 tokens spread over a 128k vocabulary share logit 10, the rest have 0. Each of the
  // 1000 has p = e^10 / (1000 e^10 + 127256) = 0.00099426, so top_p = 0.5 needs 503 of them
  // (502.88 rounded up) and top_p = 0.99 needs 996 (995.7): more than the first prefix of
  // 256 that the sampler sorts. They tie, so the kept ones are the lowest ids.
  const int32_t n = 128256;
  std::vector<float> l(static_cast<size_t>(n), 0.0f);
  std::vector<int32_t> big;
  for (int32_t i = 0; i < 1000; ++i) big.push_back(i * 128 + 5);
  for (const int32_t id : big) l[static_cast<size_t>(id)] = 10.0f;
  for (const auto& [top_p, want] : {std::pair<float, size_t>{0.5f, 503}, {0.99f, 996}}) {
    SamplerParams p = plain(1.0f);
    p.top_p = top_p;
    Sampler s(p);
    const auto got = s.probabilities(l.data(), n);
    REQUIRE(got.size() == want);
    for (size_t i = 0; i < want; ++i) {
      CHECK(got[i].id == big[i]);
      CHECK(static_cast<double>(got[i].p) == Approx(1.0 / static_cast<double>(want)));
    }
    // The same nucleus as top-k = n - 1, which sorts all its survivors (it drops one token
    // with logit 0: 4.5e-8 of the mass, far from moving the cut).
    p.top_k = n - 1;
    Sampler sk(p);
    const auto gk = sk.probabilities(l.data(), n);
    REQUIRE(gk.size() == want);
    for (size_t i = 0; i < want; ++i) CHECK(gk[i].id == got[i].id);
  }
}
