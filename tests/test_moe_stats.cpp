// MoeStatsCollector (diag/moe_stats.h) fed synthetic routing data the way Forward calls
// on_moe_routing(): counts per expert, the router entropy and top-k mass checked against values
// computed here independently (-sum p ln p over p = exp(x) / sum exp(x) in long double, no max
// subtraction), experts never chosen, max_load, NaN rows, chunking; the rendering
// (moe_stats_report.h); a SequenceRouter splitting interleaved sequences (each collector as if
// fed alone) and ObserverFanout passing each call only to those that want it.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "diag/attn_stats.h"
#include "diag/moe_stats.h"
#include "diag/moe_stats_report.h"
#include "diag/observer_fanout.h"
#include "diag/sequence_router.h"

using namespace llmctl;

namespace {

// Routed tokens of one chunk: per token its sequence, position, id, router logits and the k
// experts the engine chose (weights are not read by the statistics).
struct Routing {
  Routing(int64_t experts, int64_t chosen) : n_expert(experts), k(chosen) {}
  int64_t n_expert, k;
  std::vector<int32_t> seq, pos, tok, ids;
  std::vector<float> logits, weights;

  int64_t n() const { return static_cast<int64_t>(seq.size()); }
  void add(int32_t s, int32_t p, const std::vector<float>& x, const std::vector<int32_t>& chosen) {
    REQUIRE(static_cast<int64_t>(x.size()) == n_expert);
    REQUIRE(static_cast<int64_t>(chosen.size()) == k);
    seq.push_back(s);
    pos.push_back(p);
    tok.push_back(100 + p);
    logits.insert(logits.end(), x.begin(), x.end());
    ids.insert(ids.end(), chosen.begin(), chosen.end());
    weights.insert(weights.end(), chosen.size(), 0.5f);
  }
  ObservedBatch batch() const { return {n(), seq.data(), pos.data(), tok.data()}; }
  void feed(ForwardObserver& o, int64_t layer) const {
    o.on_moe_routing(layer, batch(), logits.data(), n_expert, ids.data(), weights.data(), k);
  }
};

// The entropy and chosen mass of one row, written without the collector's formula.
struct Expected {
  double entropy, mass;
};
Expected expected(const std::vector<float>& x, const std::vector<int32_t>& chosen) {
  long double z = 0;
  for (const float v : x) z += std::exp(static_cast<long double>(v));
  long double h = 0, m = 0;
  for (const float v : x) {
    const long double p = std::exp(static_cast<long double>(v)) / z;
    if (p > 0) h -= p * std::log(p);
  }
  for (const int32_t e : chosen) m += std::exp(static_cast<long double>(x[static_cast<size_t>(e)])) / z;
  return {static_cast<double>(h), static_cast<double>(m)};
}

const float kNegInf = -std::numeric_limits<float>::infinity();

}  // namespace

TEST_CASE("moe stats: counts, entropy, top-k mass, never chosen, max_load", "[cpu]") {
  // 3 layers, top-2 of 4 experts; layer 2 is dense (never routed).
  MoeStatsCollector c(3, 4, 2);
  Routing r0{4, 2}, r1{4, 2};
  const std::vector<float> flat{0, 0, 0, 0};
  const std::vector<float> ramp{0.0f, std::log(2.0f), std::log(3.0f), std::log(4.0f)};
  const std::vector<float> peaked{3.0f, kNegInf, 0.0f, -1.0f};
  r0.add(0, 0, flat, {0, 1});
  r0.add(0, 1, ramp, {3, 2});
  r0.add(0, 2, peaked, {0, 2});
  r1.add(0, 0, ramp, {0, 1});  // not the router's best: the statistics take the ids as given
  r1.add(0, 1, flat, {1, 0});
  r1.add(0, 2, peaked, {0, 1});
  r0.feed(c, 0);
  r1.feed(c, 1);

  CHECK(c.n_tokens() == 3);
  CHECK(c.routed(0));
  CHECK(c.routed(1));
  CHECK_FALSE(c.routed(2));
  const MoeLayerStats& l0 = c.layer(0);
  CHECK(l0.expert_tokens == std::vector<int64_t>{2, 1, 2, 1});
  CHECK(l0.never_chosen().empty());
  CHECK(l0.max_load(2) == Approx(2.0 / 1.5));  // even share 3 tokens x 2 / 4 experts
  CHECK(l0.n_finite == 3);
  CHECK(l0.n_nonfinite == 0);
  const Expected e_flat = expected(flat, {0, 1}), e_ramp = expected(ramp, {3, 2}),
                 e_peak = expected(peaked, {0, 2});
  CHECK(e_flat.entropy == Approx(std::log(4.0)));  // the expectation's own sanity
  CHECK(e_ramp.mass == Approx(0.7));
  CHECK(l0.mean_entropy() == Approx((e_flat.entropy + e_ramp.entropy + e_peak.entropy) / 3).epsilon(1e-12));
  CHECK(l0.mean_top_k_mass() == Approx((e_flat.mass + e_ramp.mass + e_peak.mass) / 3).epsilon(1e-12));

  const MoeLayerStats& l1 = c.layer(1);
  CHECK(l1.expert_tokens == std::vector<int64_t>{3, 3, 0, 0});
  CHECK(l1.never_chosen() == std::vector<int32_t>{2, 3});
  CHECK(l1.max_load(2) == Approx(2.0));
  const double mass1 = (expected(ramp, {0, 1}).mass + 0.5 + expected(peaked, {0, 1}).mass) / 3;
  CHECK(l1.mean_top_k_mass() == Approx(mass1).epsilon(1e-12));

  const nlohmann::json j = moe_stats_json(c);
  CHECK(j["n_experts"] == 4);
  CHECK(j["k"] == 2);
  CHECK(j["n_tokens"] == 3);
  CHECK(j["uniform_entropy"].get<double>() == Approx(std::log(4.0)));
  REQUIRE(j["layers"].size() == 2);  // the dense layer is left out
  CHECK(j["layers"][1]["layer"] == 1);
  CHECK(j["layers"][1]["expert_tokens"] == std::vector<int64_t>{3, 3, 0, 0});
  CHECK(j["layers"][1]["never_chosen"] == std::vector<int32_t>{2, 3});
  CHECK(j["layers"][0]["entropy"].get<double>() == Approx(l0.mean_entropy()));
  CHECK(j["layers"][0]["nonfinite_rows"] == 0);

  const std::string table = moe_stats_table(c);
  CAPTURE(table);
  CHECK(table.find("2 layers with experts, top-2 of 4 experts, over 3 tokens") != std::string::npos);
  CHECK(table.find("never chosen: layer 1: 2, 3\n") != std::string::npos);
  CHECK(table.find("never chosen: layer 0") == std::string::npos);
  CHECK(table.find("    e3") != std::string::npos);  // counts as columns for <= 16 experts
  CHECK(table.find("\n    2 ") == std::string::npos);  // no row for the dense layer
  CHECK(moe_stats_line(c).find("3 tokens, top-2 of 4") != std::string::npos);
  CHECK(moe_stats_line(c).find("2 of 8 (layer, expert) pairs never chosen") != std::string::npos);
}

TEST_CASE("moe stats: a NaN or +Inf router row has no entropy but its experts count", "[cpu]") {
  MoeStatsCollector c(1, 3, 1);
  Routing r{3, 1};
  const float nan = std::numeric_limits<float>::quiet_NaN();
  r.add(0, 0, {nan, 1.0f, 2.0f}, {0});
  r.add(0, 1, {std::numeric_limits<float>::infinity(), 1.0f, 2.0f}, {0});
  r.add(0, 2, {kNegInf, kNegInf, kNegInf}, {1});
  r.add(0, 3, {1.0f, 2.0f, 3.0f}, {2});
  r.feed(c, 0);
  const MoeLayerStats& l = c.layer(0);
  CHECK(l.expert_tokens == std::vector<int64_t>{2, 1, 1});
  CHECK(l.n_nonfinite == 3);
  CHECK(l.n_finite == 1);
  CHECK(l.mean_entropy() == Approx(expected({1.0f, 2.0f, 3.0f}, {2}).entropy).epsilon(1e-12));
  CHECK(moe_stats_table(c).find("NaN/Inf logits (no entropy or mass): layer 0: 3") !=
        std::string::npos);
  // Large logits: the max subtraction keeps them finite (exp(1000) overflows double).
  double h = -1, m = -1;
  const std::vector<float> big{1000.0f, 0.0f};
  const std::vector<int32_t> top{0};
  REQUIRE(router_entropy_and_mass(big.data(), 2, top.data(), 1, &h, &m));
  CHECK(h == Approx(0.0).margin(1e-300));
  CHECK(m == 1.0);
  // No token at all: nothing exists.
  MoeStatsCollector empty(2, 8, 2);
  CHECK(std::isnan(empty.layer(0).mean_entropy()));
  CHECK(std::isnan(empty.layer(0).max_load(2)));
  CHECK(moe_stats_json(empty)["layers"].empty());
  CHECK_THROWS_WITH(MoeStatsCollector(2, 8, 9), Catch::Contains("1 <= k <= experts"));
}

TEST_CASE("moe stats: chunks add up to the whole; more than 16 experts go to a block", "[cpu]") {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  std::uniform_int_distribution<int32_t> pick(0, 39);
  Routing all{40, 3};
  std::vector<Routing> parts(3, Routing{40, 3});
  for (int32_t p = 0; p < 30; ++p) {
    std::vector<float> x(40);
    for (float& v : x) v = u(rng);
    const std::vector<int32_t> ids{pick(rng), pick(rng), pick(rng)};
    all.add(0, p, x, ids);
    parts[static_cast<size_t>(p % 3 == 0 ? 0 : p < 20 ? 1 : 2)].add(0, p, x, ids);
  }
  MoeStatsCollector whole(1, 40, 3), chunked(1, 40, 3);
  all.feed(whole, 0);
  for (const Routing& r : parts) r.feed(chunked, 0);
  CHECK(chunked.layer(0).expert_tokens == whole.layer(0).expert_tokens);
  CHECK(chunked.layer(0).mean_entropy() == Approx(whole.layer(0).mean_entropy()).epsilon(1e-14));
  CHECK(chunked.layer(0).mean_top_k_mass() ==
        Approx(whole.layer(0).mean_top_k_mass()).epsilon(1e-14));
  int64_t total = 0;
  for (const int64_t n : whole.layer(0).expert_tokens) total += n;
  CHECK(total == 30 * 3);
  const std::string table = moe_stats_table(whole);
  CAPTURE(table);
  CHECK(table.find("tokens per expert (layer, first expert of the line, 16 per line):\n") !=
        std::string::npos);
  CHECK(table.find("\n    0    e0") != std::string::npos);
  CHECK(table.find("\n        e32") != std::string::npos);
  CHECK(table.find("   e39") == std::string::npos);  // no per-expert columns
}

TEST_CASE("moe stats: a SequenceRouter gives each sequence what it gives alone", "[cpu]") {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::uniform_int_distribution<int32_t> pick(0, 7);
  Routing mixed{8, 2}, only_a{8, 2}, only_b{8, 2};
  // Sequence 5 has 3 prompt tokens then decodes; sequence 9 joins: runs of each in the chunk.
  const int32_t order[][2] = {{5, 0}, {5, 1}, {5, 2}, {9, 0}, {9, 1}, {5, 3}, {9, 2}};
  for (const auto& sp : order) {
    std::vector<float> x(8);
    for (float& v : x) v = u(rng);
    const int32_t a = pick(rng), b = (a + 1 + pick(rng) % 7) % 8;
    mixed.add(sp[0], sp[1], x, {a, b});
    (sp[0] == 5 ? only_a : only_b).add(sp[0], sp[1], x, {a, b});
  }
  MoeStatsCollector ca(2, 8, 2), cb(2, 8, 2), ra(2, 8, 2), rb(2, 8, 2);
  for (int64_t layer = 0; layer < 2; ++layer) {
    only_a.feed(ca, layer);
    only_b.feed(cb, layer);
  }
  SequenceRouter router;
  CHECK_FALSE(router.wants_moe_routing());  // nothing bound
  router.bind(5, &ra);
  router.bind(9, &rb);
  CHECK(router.wants_moe_routing());
  CHECK_FALSE(router.wants_attention_stats());  // no bound observer asks for them
  for (int64_t layer = 0; layer < 2; ++layer) mixed.feed(router, layer);
  for (int64_t layer = 0; layer < 2; ++layer) {
    CHECK(ra.layer(layer).expert_tokens == ca.layer(layer).expert_tokens);
    CHECK(rb.layer(layer).expert_tokens == cb.layer(layer).expert_tokens);
    CHECK(ra.layer(layer).entropy_sum == ca.layer(layer).entropy_sum);
    CHECK(rb.layer(layer).top_k_mass_sum == cb.layer(layer).top_k_mass_sum);
  }
  CHECK(ra.n_tokens() == 4);
  CHECK(rb.n_tokens() == 3);
  AttnStatsCollector attn(2, 1);
  router.bind(9, &attn);  // replaces sequence 9's binding
  CHECK(router.wants_attention_stats());
  CHECK(router.wants_residual());
  router.unbind(5);
  CHECK_FALSE(router.wants_moe_routing());
}

TEST_CASE("observer fanout: wants what any wants, passes each call only to those asking",
          "[cpu]") {
  ObserverFanout f;
  CHECK(f.empty());
  CHECK_FALSE(f.wants_moe_routing());
  MoeStatsCollector moe(1, 4, 1);
  AttnStatsCollector attn(1, 1);
  f.add(&attn);
  CHECK(f.wants_attention_stats());
  CHECK_FALSE(f.wants_moe_routing());
  f.add(&moe);
  CHECK(f.wants_moe_routing());
  CHECK(f.wants_residual());
  CHECK_FALSE(f.wants_matmul_inputs());
  Routing r{4, 1};
  r.add(0, 0, {1.0f, 0.0f, 0.0f, 0.0f}, {0});
  r.feed(f, 0);
  CHECK(moe.layer(0).expert_tokens == std::vector<int64_t>{1, 0, 0, 0});
  const std::vector<float> x{std::numeric_limits<float>::quiet_NaN(), 1.0f};
  f.on_residual(0, r.batch(), x.data(), 2);
  REQUIRE(attn.alert());
  CHECK(attn.alert()->kind == AttnAlert::Kind::NonFiniteResidual);
}
