// Autocorrelation and loop detection (diag/acf.h): kappa and Pearson ACF against direct
// formulas written here, periods of synthetic series, the loop test and its online form, and
// greedy stories260K continuations that loop and that do not.
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "diag/acf.h"
#include "diag/acf_report.h"
#include "io/gguf.h"
#include "model/forward.h"
#include "model/generate.h"
#include "model/weights.h"
#include "support/test_data.h"

using namespace llmctl;

namespace {

// Cohen's kappa of the pairs (x[t-k], x[t]) straight from its definition.
double kappa_direct(const std::vector<int32_t>& x, size_t k) {
  const size_t n = x.size() - k;
  std::map<int32_t, double> fa, fb;
  double agree = 0.0;
  for (size_t t = k; t < x.size(); ++t) {
    fa[x[t - k]] += 1.0 / static_cast<double>(n);
    fb[x[t]] += 1.0 / static_cast<double>(n);
    agree += x[t] == x[t - k] ? 1.0 : 0.0;
  }
  double pe = 0.0;
  for (const auto& [v, p] : fa) pe += p * (fb.count(v) ? fb[v] : 0.0);
  return (agree / static_cast<double>(n) - pe) / (1.0 - pe);
}

std::vector<int32_t> random_ids(std::mt19937& rng, size_t n, int32_t lo, int32_t hi) {
  std::uniform_int_distribution<int32_t> d(lo, hi);
  std::vector<int32_t> v(n);
  for (int32_t& x : v) x = d(rng);
  return v;
}

// `prefix` followed by `pattern` repeated `times` times.
std::vector<int32_t> looped(std::vector<int32_t> prefix, const std::vector<int32_t>& pattern,
                            int times) {
  for (int i = 0; i < times; ++i) prefix.insert(prefix.end(), pattern.begin(), pattern.end());
  return prefix;
}

}  // namespace

TEST_CASE("token_acf is Cohen's kappa per lag", "[cpu]") {
  std::mt19937 rng(1);
  // Few distinct ids, so chance agreement is large and kappa's correction matters.
  const std::vector<int32_t> x = random_ids(rng, 120, 0, 3);
  const std::vector<double> acf = token_acf(x, 60);
  REQUIRE(acf.size() == 61);
  CHECK(acf[0] == 1.0);
  for (size_t k = 1; k <= 60; ++k) {
    INFO("lag " << k);
    CHECK(acf[k] == Approx(kappa_direct(x, k)).margin(1e-12));
    CHECK(std::abs(acf[k]) < 0.35);  // random: near 0
  }
  // Lags past the data are NaN; a constant series agrees with itself at every lag.
  CHECK(std::isnan(token_acf({1, 2, 3}, 5)[4]));
  CHECK(token_acf({7, 7, 7, 7}, 2)[2] == 1.0);
}

TEST_CASE("pearson_acf against the direct formula: a sine's period", "[cpu]") {
  std::vector<double> x;
  std::mt19937 rng(2);
  std::normal_distribution<double> noise(0.0, 0.1);
  for (int t = 0; t < 96; ++t)
    x.push_back(0.5 + 0.3 * std::sin(2.0 * M_PI * t / 12.0) + noise(rng));
  const std::vector<double> acf = pearson_acf(x, 48);
  double mean = 0.0;
  for (const double v : x) mean += v / 96.0;
  double den = 0.0;
  for (const double v : x) den += (v - mean) * (v - mean);
  for (size_t k = 0; k <= 48; ++k) {
    double num = 0.0;
    for (size_t t = 0; t + k < x.size(); ++t) num += (x[t] - mean) * (x[t + k] - mean);
    CHECK(acf[k] == Approx(num / den).margin(1e-12));
  }
  const Period p = dominant_period(acf);
  CHECK(p.lag == 12);
  CHECK(p.strength > 0.6);
  CHECK(std::isnan(pearson_acf({0.5, 0.5, 0.5, 0.5}, 2)[1]));  // constant: undefined
  CHECK(std::isnan(pearson_acf({0.5, NAN, 0.2, 0.5}, 2)[1]));
}

TEST_CASE("dominant period of periodic and random token sequences", "[cpu]") {
  std::mt19937 rng(3);
  const std::vector<int32_t> pattern = random_ids(rng, 7, 0, 40);
  const std::vector<int32_t> periodic = looped({}, pattern, 20);
  const std::vector<double> acf = token_acf(periodic, 70);
  CHECK(acf[7] == 1.0);
  CHECK(acf[14] == 1.0);
  const Period p = dominant_period(acf);
  CHECK(p.lag == 7);  // not 14, 21 ...: the fundamental
  CHECK(p.strength == 1.0);
  // A loop after a random prefix: the fundamental still wins, below 1.
  const std::vector<int32_t> tail = looped(random_ids(rng, 40, 100, 200), pattern, 10);
  const Period q = dominant_period(token_acf(tail, 55));
  CHECK(q.lag == 7);
  CHECK(q.strength > 0.5);
  CHECK(q.strength < 1.0);
  // Random ids: nothing strong.
  const Period r = dominant_period(token_acf(random_ids(rng, 300, 0, 50), 150));
  CHECK(r.strength < 0.2);
  CHECK(dominant_period(token_acf({4}, 0)).lag == 0);
}

TEST_CASE("find_loop: period, start and the two-repeat rule", "[cpu]") {
  std::mt19937 rng(4);
  const std::vector<int32_t> prefix = random_ids(rng, 30, 100, 200);
  const std::vector<int32_t> pattern = {0, 1, 2, 3, 4, 5, 6, 7, 8};  // period 9
  const LoopMatch m = find_loop(looped(prefix, pattern, 4));
  CHECK(m.detected);
  CHECK(m.period == 9);
  CHECK(m.start == 30);
  CHECK(m.match_rate == 1.0);
  CHECK(m.span == 18);
  // The pattern once and one repeat: not yet a loop.
  CHECK_FALSE(find_loop(looped(prefix, pattern, 2)).detected);
  // One token changed inside a long loop: the last 36 tokens (period 18's window) still
  // match at lag 9 but one, 97% >= 95%; period 9 is reported, not 18.
  std::vector<int32_t> noisy = looped(prefix, pattern, 6);
  noisy[noisy.size() - 5] = 150;
  const LoopMatch mn = find_loop(noisy);
  CHECK(mn.detected);
  CHECK(mn.period == 9);
  CHECK(mn.match_rate == Approx(35.0 / 36.0));
  CHECK(mn.span == 36);
  // A short run of one token is not a loop; past kMinLoopSpan + 1 it is (period 1).
  CHECK_FALSE(find_loop(looped(prefix, {42}, 10)).detected);
  const LoopMatch one = find_loop(looped(prefix, {42}, 17));
  CHECK(one.detected);
  CHECK(one.period == 1);
  CHECK_FALSE(find_loop(random_ids(rng, 400, 0, 60)).detected);
}

TEST_CASE("LoopDetector fires as the third occurrence completes", "[cpu]") {
  std::mt19937 rng(5);
  // The prefix ids never equal pattern ids, so every comparison reaching into the prefix
  // is a miss. With W = 18 no miss is allowed (95%): detection at start + 3P, not before.
  const std::vector<int32_t> ids =
      looped(random_ids(rng, 30, 100, 200), {0, 1, 2, 3, 4, 5, 6, 7, 8}, 4);
  LoopDetector d;
  size_t fired = 0;
  for (size_t i = 0; i < ids.size() && !d.detected(); ++i) {
    d.push(ids[i]);
    if (d.detected()) fired = i + 1;
  }
  CHECK(fired == 30 + 27);
  CHECK(d.match().period == 9);
}

TEST_CASE("analyze_acf: report fields and JSON", "[cpu]") {
  const std::vector<int32_t> ids = looped({50, 51, 52}, {1, 2, 3, 4, 5}, 8);
  std::vector<double> top1;
  for (size_t i = 0; i < ids.size(); ++i) top1.push_back(ids[i] == 3 ? 0.9 : 0.4);
  const AcfReport r = analyze_acf(ids, top1);
  CHECK(r.n_tokens == 43);
  CHECK(r.max_lag == 21);
  CHECK(r.tokens.period.lag == 5);
  CHECK(r.top1.period.lag == 5);
  CHECK(r.loop.detected);
  CHECK(r.loop.period == 5);
  CHECK(r.loop.start == 3);
  const nlohmann::json j = acf_json(r);
  CHECK(j["tokens"]["acf"].size() == 21);
  CHECK(j["loop"]["detected"] == true);
  CHECK(j["top1_prob"]["mean"].get<double>() == Approx((8 * 0.9 + 35 * 0.4) / 43.0));
  CHECK(acf_table(r).find("loop: detected: period 5 tokens") != std::string::npos);
  // Too short for any lag: no period, JSON nulls.
  const AcfReport e = analyze_acf({3}, {0.5});
  CHECK(e.tokens.period.lag == 0);
  CHECK(acf_json(e)["tokens"]["strength"].is_null());
}

TEST_CASE("stories260K greedy continuations: one loops, one does not", "[cpu][slow]") {
  const GgufFile f = GgufFile::open(llmctl::test::require_test_file("models/stories260K.gguf"));
  const ModelConfig c = config_from_gguf(f);
  const ModelWeights w = bind_weights(f, c);
  cpu::CpuBackend backend;
  const auto greedy = [&](const std::vector<int32_t>& prompt, int64_t n) {
    ForwardOptions fo;
    fo.kv.n_blocks = 16;  // 256 positions
    Forward fwd(c, w, backend, fo);
    GenerateOptions g;
    g.n_ctx = 256;
    g.n_predict = n;
    g.ignore_eos = true;
    return generate(fwd, prompt, g).generated_ids;
  };
  // "Anna" repeats "They have a big box." three times by token 58 and ends in "They see the
  // box." over and over; "Once upon a time" tells a story for 400 tokens without a loop.
  const std::vector<int32_t> loops = greedy({1, 410, 447, 416, 416, 412}, 200);
  const LoopMatch m = first_loop(loops);
  CHECK(m.detected);
  // Independently of find_loop: in the prefix where it fired, the last two periods equal the
  // period before them.
  REQUIRE(m.period > 1);
  REQUIRE(m.at >= 3 * m.period);
  const auto at = static_cast<size_t>(m.at), p = static_cast<size_t>(m.period);
  for (size_t t = at - 2 * p; t < at; ++t) CHECK(loops[t] == loops[t - p]);
  const std::vector<int32_t> story = greedy({1, 403, 407, 261, 378}, 400);
  CHECK_FALSE(first_loop(story).detected);
  CHECK(dominant_period(token_acf(story, 200)).strength < 0.3);
}

TEST_CASE("top1_probability is the softmax maximum of the raw logits", "[cpu]") {
  const float two[] = {0.0f, static_cast<float>(std::log(3.0))};  // softmax (1/4, 3/4)
  CHECK(top1_probability(two, 2) == Approx(0.75).epsilon(1e-7));
  const float flat[] = {-2.0f, -2.0f, -2.0f, -2.0f};
  CHECK(top1_probability(flat, 4) == Approx(0.25));
  const float big[] = {1000.0f, 0.0f};  // no overflow: the max is subtracted first
  CHECK(top1_probability(big, 2) == 1.0);
  const float bad[] = {1.0f, NAN};
  CHECK(std::isnan(top1_probability(bad, 2)));
}
