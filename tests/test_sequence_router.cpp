// SequenceRouter (diag/sequence_router.h): each sequence's collector gets exactly the rows of
// that sequence, as if it had been observed alone; and the attention alert does not depend on
// how a sequence's tokens were split into chunks (diag/attn_stats.h, the alert order).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "diag/attn_stats.h"
#include "diag/sequence_router.h"

using namespace llmctl;

namespace {

constexpr int64_t kLayers = 2, kHeads = 2, kEmbd = 3;

// One observed chunk: per token its sequence, position and id, its statistics rows
// (n_layers, n_tokens, n_heads, kAttnStatFields) and residual rows (n_layers + 1, n_tokens,
// n_embd), embeddings first.
struct Chunk {
  std::vector<int32_t> seq, pos, tok;
  std::vector<std::vector<float>> stats;     // per layer
  std::vector<std::vector<float>> residual;  // per layer + 1

  int64_t n() const { return static_cast<int64_t>(seq.size()); }
  void add(int32_t s, int32_t p, int32_t t, std::mt19937& rng) {
    std::uniform_real_distribution<float> u(-5.0f, 5.0f);
    seq.push_back(s);
    pos.push_back(p);
    tok.push_back(t);
    stats.resize(kLayers);
    residual.resize(kLayers + 1);
    for (auto& l : stats)
      for (int64_t h = 0; h < kHeads; ++h) {
        const float a = u(rng), b = u(rng);
        std::vector<float> row(kAttnStatFields, 0.0f);
        row[kAttnStatMax] = std::max(a, b);
        row[kAttnStatMin] = std::min(a, b);
        row[kAttnStatSum] = a + b;
        row[kAttnStatSumSq] = a * a + b * b;
        row[kAttnStatEntropy] = std::abs(u(rng)) / 10.0f;
        row[kAttnStatCount] = 2.0f;
        l.insert(l.end(), row.begin(), row.end());
      }
    for (auto& r : residual)
      for (int64_t i = 0; i < kEmbd; ++i) r.push_back(u(rng));
  }
  // Token t's row of layer l's statistics, to plant a value.
  float* stat(int64_t l, int64_t t, int64_t h) {
    return stats[static_cast<size_t>(l)].data() + (t * kHeads + h) * kAttnStatFields;
  }
  // The tokens of sequence s only, in order.
  Chunk only(int32_t s) const {
    Chunk c;
    c.stats.resize(kLayers);
    c.residual.resize(kLayers + 1);
    for (int64_t t = 0; t < n(); ++t) {
      if (seq[static_cast<size_t>(t)] != s) continue;
      c.seq.push_back(s);
      c.pos.push_back(pos[static_cast<size_t>(t)]);
      c.tok.push_back(tok[static_cast<size_t>(t)]);
      for (int64_t l = 0; l < kLayers; ++l) {
        const float* row = stats[static_cast<size_t>(l)].data() + t * kHeads * kAttnStatFields;
        auto& dst = c.stats[static_cast<size_t>(l)];
        dst.insert(dst.end(), row, row + kHeads * kAttnStatFields);
      }
      for (int64_t l = 0; l <= kLayers; ++l) {
        const float* row = residual[static_cast<size_t>(l)].data() + t * kEmbd;
        auto& dst = c.residual[static_cast<size_t>(l)];
        dst.insert(dst.end(), row, row + kEmbd);
      }
    }
    return c;
  }
  // In the forward pass's order: embeddings, then per layer statistics and residual.
  void feed(ForwardObserver& o) const {
    const ObservedBatch b{n(), seq.data(), pos.data(), tok.data()};
    o.on_residual(-1, b, residual[0].data(), kEmbd);
    for (int64_t l = 0; l < kLayers; ++l) {
      o.on_attention_stats(l, b, stats[static_cast<size_t>(l)].data(), kHeads);
      o.on_residual(l, b, residual[static_cast<size_t>(l + 1)].data(), kEmbd);
    }
  }
};

void check_same(const AttnStatsCollector& a, const AttnStatsCollector& b) {
  CHECK(a.n_tokens() == b.n_tokens());
  for (int64_t l = 0; l < kLayers; ++l)
    for (int64_t h = 0; h < kHeads; ++h) {
      const AttnHeadStats &x = a.head(l, h), &y = b.head(l, h);
      CHECK(x.max == y.max);
      CHECK(x.max_pos == y.max_pos);
      CHECK(x.min == y.min);
      CHECK(x.sum == y.sum);
      CHECK(x.sum_sq == y.sum_sq);
      CHECK(x.n_queries == y.n_queries);
      CHECK(x.entropy_sum == y.entropy_sum);
    }
  for (int64_t l = -1; l < kLayers; ++l) {
    CHECK(a.residual(l).abs_max == b.residual(l).abs_max);
    CHECK(a.residual(l).abs_max_pos == b.residual(l).abs_max_pos);
  }
  REQUIRE(a.alert().has_value() == b.alert().has_value());
  if (a.alert()) {
    CHECK(a.alert()->layer == b.alert()->layer);
    CHECK(a.alert()->head == b.alert()->head);
    CHECK(a.alert()->pos == b.alert()->pos);
  }
}

}  // namespace

TEST_CASE("SequenceRouter: each sequence's collector sees its own tokens only", "[cpu]") {
  std::mt19937 rng(7);
  // Step 1: sequence 7 decodes (position 4), sequence 2 prefills positions 0-2, sequence 5
  // (unbound) prefills 0-1. Step 2: 2 and 7 decode, then 7 again (not adjacent to its first
  // run: routed as a second run, still in position order).
  Chunk s1, s2;
  s1.add(7, 4, 11, rng);
  for (int32_t p = 0; p < 3; ++p) s1.add(2, p, 20 + p, rng);
  s1.add(5, 0, 1, rng);
  s1.add(5, 1, 2, rng);
  s2.add(2, 3, 23, rng);
  s2.add(7, 5, 12, rng);
  s2.add(5, 2, 3, rng);
  s2.add(7, 6, 13, rng);
  *s2.stat(1, 3, 1) = 40.0f;  // sequence 7, position 6, layer 1 head 1: an alert

  AttnStatsCollector a(kLayers, kHeads, 30.0), b(kLayers, kHeads, 30.0);
  SequenceRouter router;
  router.bind(7, &a);
  router.bind(2, &b);
  s1.feed(router);
  s2.feed(router);

  AttnStatsCollector a_alone(kLayers, kHeads, 30.0), b_alone(kLayers, kHeads, 30.0);
  s1.only(7).feed(a_alone);
  s2.only(7).feed(a_alone);
  s1.only(2).feed(b_alone);
  s2.only(2).feed(b_alone);
  CHECK(a.n_tokens() == 3);
  CHECK(b.n_tokens() == 4);
  check_same(a, a_alone);
  check_same(b, b_alone);
  REQUIRE(a.alert());
  CHECK(a.alert()->pos == 6);
  CHECK(a.alert()->token == 13);
  CHECK(!b.alert());

  // Unbound, a sequence's tokens go nowhere; a new binding of the id starts from there.
  router.unbind(7);
  AttnStatsCollector c(kLayers, kHeads, 30.0);
  router.bind(2, &c);
  s2.feed(router);
  CHECK(a.n_tokens() == 3);
  CHECK(b.n_tokens() == 4);
  CHECK(c.n_tokens() == 1);
}

TEST_CASE("attention alert: the lowest layer, then the earliest position, in any chunking",
          "[cpu]") {
  std::mt19937 rng(11);
  Chunk all;
  for (int32_t p = 0; p < 4; ++p) all.add(0, p, 100 + p, rng);
  *all.stat(1, 0, 0) = 50.0f;  // layer 1, position 0
  *all.stat(0, 3, 1) = 60.0f;  // layer 0, position 3: the lower layer wins
  *all.stat(0, 2, 0) = 45.0f;  // layer 0, position 2: earlier in the same layer: wins
  Chunk first, second;         // positions 0-1 and 2-3
  for (int32_t p = 0; p < 4; ++p) (p < 2 ? first : second).add(0, p, 100 + p, rng);
  const auto copy_rows = [&](Chunk& dst, int64_t from) {
    for (int64_t l = 0; l < kLayers; ++l)
      for (int64_t t = 0; t < dst.n(); ++t)
        for (int64_t h = 0; h < kHeads; ++h)
          std::copy_n(all.stat(l, from + t, h), kAttnStatFields, dst.stat(l, t, h));
    for (int64_t l = 0; l <= kLayers; ++l)
      std::copy_n(all.residual[static_cast<size_t>(l)].data() + from * kEmbd, dst.n() * kEmbd,
                  dst.residual[static_cast<size_t>(l)].data());
  };
  copy_rows(first, 0);
  copy_rows(second, 2);

  AttnStatsCollector one(kLayers, kHeads, 30.0), two(kLayers, kHeads, 30.0);
  all.feed(one);
  first.feed(two);
  second.feed(two);
  check_same(one, two);
  REQUIRE(two.alert());
  CHECK(two.alert()->layer == 0);
  CHECK(two.alert()->pos == 2);
  CHECK(two.alert()->head == 0);
  CHECK(two.alert()->value == 45.0);

  // Within a layer its scores come before its residual; the embeddings come first of all.
  Chunk nan_res = all;
  nan_res.residual[1][0] = std::numeric_limits<float>::quiet_NaN();  // after layer 0, pos 0
  AttnStatsCollector r(kLayers, kHeads, 30.0);
  nan_res.feed(r);
  REQUIRE(r.alert());
  CHECK(r.alert()->kind == AttnAlert::Kind::ScoreMax);
  CHECK(r.alert()->layer == 0);
  nan_res.residual[0][5] = std::numeric_limits<float>::infinity();  // embeddings, pos 1
  AttnStatsCollector e(kLayers, kHeads, 30.0);
  nan_res.feed(e);
  REQUIRE(e.alert());
  CHECK(e.alert()->kind == AttnAlert::Kind::NonFiniteResidual);
  CHECK(e.alert()->layer == -1);
  CHECK(e.alert()->pos == 1);
}
