// Attention statistics: Backend::attention_with_stats on both CPU backends against a direct
// double computation (and NaN/Inf injected into K), its output against attention()'s bit for
// bit, batch and thread invariance; the AttnStatsCollector's folding and alerts; and a NaN
// planted in one layer of stories260K traced back to that layer.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_fast_backend.h"
#include "diag/attn_stats.h"
#include "diag/attn_stats_report.h"
#include "io/gguf.h"
#include "model/forward.h"
#include "model/generate.h"
#include "model/weights.h"
#include "support/test_data.h"

using namespace llmctl;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// One sequence whose K/V rows (positions 0 .. n-1, kv_dim each) sit in pool blocks of 4 in
// the order {1, 0} (positions 0-3 in block 1, 4-7 in block 0); query tokens at `positions`.
struct Attn {
  Buffer k_pool, v_pool, table, rows, pos, q;
  PagedKv kv() const { return PagedKv{&k_pool, &v_pool, 4, &table, 2, &rows, &pos}; }
};

Attn setup(Backend& be, const std::vector<float>& q, const std::vector<float>& k,
           const std::vector<float>& v, int64_t kv_dim, const std::vector<int32_t>& positions,
           BufferType type) {
  const auto n_kv = static_cast<int64_t>(k.size()) / kv_dim;
  const auto n_q = static_cast<int64_t>(positions.size());
  Attn a;
  a.k_pool = be.alloc(8 * kv_dim, type);
  a.v_pool = be.alloc(8 * kv_dim, type);
  std::vector<int32_t> slots;
  for (int64_t j = 0; j < n_kv; ++j) slots.push_back(static_cast<int32_t>(j < 4 ? 4 + j : j - 4));
  Buffer kb = be.alloc(n_kv * kv_dim), vb = be.alloc(n_kv * kv_dim);
  Buffer sb = be.alloc(n_kv, BufferType::I32);
  be.upload(kb, k.data(), n_kv * kv_dim);
  be.upload(vb, v.data(), n_kv * kv_dim);
  be.upload(sb, slots.data(), n_kv);
  be.kv_store(kb, vb, sb, n_kv, kv_dim, a.k_pool, a.v_pool);
  const std::vector<int32_t> table = {1, 0}, rows(positions.size(), 0);
  a.table = be.alloc(2, BufferType::I32);
  a.rows = be.alloc(n_q, BufferType::I32);
  a.pos = be.alloc(n_q, BufferType::I32);
  be.upload(a.table, table.data(), 2);
  be.upload(a.rows, rows.data(), n_q);
  be.upload(a.pos, positions.data(), n_q);
  a.q = be.alloc(static_cast<int64_t>(q.size()));
  be.upload(a.q, q.data(), static_cast<int64_t>(q.size()));
  return a;
}

std::vector<float> download(Backend& be, const Buffer& b) {
  std::vector<float> v(static_cast<size_t>(b.size()));
  be.download(b, v.data(), b.size());
  return v;
}

std::vector<float> normal(std::mt19937& rng, size_t n, float sd) {
  std::normal_distribution<float> d(0.0f, sd);
  std::vector<float> v(n);
  std::generate(v.begin(), v.end(), [&] { return d(rng); });
  return v;
}

// attention() and attention_with_stats() on the same inputs: {out, out_with_stats, stats}.
struct Both {
  std::vector<float> out, out_stats, stats;
};
Both run_both(Backend& be, const std::vector<float>& q, const std::vector<float>& k,
              const std::vector<float>& v, const AttentionShape& s,
              const std::vector<int32_t>& positions, BufferType type) {
  const Attn a = setup(be, q, k, v, s.n_kv_heads * s.head_dim, positions, type);
  const auto n = static_cast<int64_t>(positions.size());
  Buffer out = be.alloc(n * s.n_heads * s.head_dim), out2 = be.alloc(n * s.n_heads * s.head_dim);
  Buffer stats = be.alloc(n * s.n_heads * kAttnStatFields);
  be.attention(a.q, a.kv(), n, s, out);
  be.attention_with_stats(a.q, a.kv(), n, s, out2, stats);
  return Both{download(be, out), download(be, out2), download(be, stats)};
}

// generate() on a fresh Forward observed by a collector (no score threshold unless given).
AttnStatsCollector observed_run(const ModelConfig& c, const ModelWeights& w, Backend& be,
                                const ForwardOptions& fo, const std::vector<int32_t>& prompt,
                                const GenerateOptions& g,
                                std::optional<double> threshold = std::nullopt) {
  Forward fwd(c, w, be, fo);
  AttnStatsCollector stats(c.n_layers, c.n_heads, threshold);
  fwd.set_observer(&stats);
  generate(fwd, prompt, g);
  return stats;
}

}  // namespace

TEST_CASE("attention_with_stats against a direct double computation", "[cpu]") {
  std::mt19937 rng(11);
  const AttentionShape s{4, 2, 8};  // GQA: heads 0-1 read kv head 0, heads 2-3 kv head 1
  const int64_t kv_dim = 16;
  const std::vector<int32_t> positions = {6, 0, 3};
  const std::vector<float> k = normal(rng, 7 * kv_dim, 2.0f), v = normal(rng, 7 * kv_dim, 1.0f);
  const std::vector<float> q = normal(rng, 3 * 32, 2.0f);
  cpu::CpuBackend ref;
  cpu::CpuFastBackend fast(2);
  for (Backend* be : {static_cast<Backend*>(&ref), static_cast<Backend*>(&fast)}) {
    INFO((be == &ref ? "reference" : "fast"));
    const Both got = run_both(*be, q, k, v, s, positions, BufferType::F32);
    for (size_t t = 0; t < 3; ++t) {
      const int64_t n_kv = positions[t] + 1;
      for (int64_t h = 0; h < 4; ++h) {
        std::vector<double> sc;
        for (int64_t j = 0; j < n_kv; ++j) {
          double dot = 0.0;
          for (int64_t i = 0; i < 8; ++i)
            dot += static_cast<double>(q[t * 32 + static_cast<size_t>(h * 8 + i)]) *
                   static_cast<double>(k[static_cast<size_t>(j * kv_dim + (h / 2) * 8 + i)]);
          sc.push_back(dot / std::sqrt(8.0));
        }
        double mx = -1e300, mn = 1e300, sum = 0.0, sum_sq = 0.0, z = 0.0, ent = 0.0;
        for (const double x : sc) {
          mx = std::max(mx, x);
          mn = std::min(mn, x);
          sum += x;
          sum_sq += x * x;
        }
        for (const double x : sc) z += std::exp(x - mx);
        for (const double x : sc) {
          const double a = std::exp(x - mx) / z;
          ent -= a * std::log(a);
        }
        const float* st = got.stats.data() + (t * 4 + static_cast<size_t>(h)) * kAttnStatFields;
        INFO("token " << t << " head " << h);
        // f32 dot products of 8 terms of size ~4: absolute error well under 1e-4.
        CHECK(st[kAttnStatMax] == Approx(mx).margin(1e-4));
        CHECK(st[kAttnStatMin] == Approx(mn).margin(1e-4));
        CHECK(st[kAttnStatSum] == Approx(sum).margin(1e-3));
        CHECK(st[kAttnStatSumSq] == Approx(sum_sq).epsilon(1e-5).margin(1e-3));
        CHECK(st[kAttnStatNan] == 0.0f);
        CHECK(st[kAttnStatInf] == 0.0f);
        CHECK(st[kAttnStatEntropy] == Approx(ent).margin(1e-5));
        CHECK(st[kAttnStatCount] == static_cast<float>(n_kv));
      }
    }
    // Position 0 attends to one row: entropy exactly 0, max == min.
    const float* p0 = got.stats.data() + 4 * kAttnStatFields;
    CHECK(p0[kAttnStatEntropy] == 0.0f);
    CHECK(p0[kAttnStatMax] == p0[kAttnStatMin]);
  }
}

TEST_CASE("attention_with_stats counts NaN and Inf scores", "[cpu]") {
  // head_dim 4, 2 kv heads, 1 query head each. q = (10, 0, 0, 0) for both heads, so the score
  // of row j is 10 * K[j][0] / 2. kv head 0: K[.][0] = NaN, 3e38 (overflows to +inf),
  // -3e38 (-inf), 2 (score 10). kv head 1: -3e38 (-inf), 1, 2, 3 (scores 5, 10, 15).
  const AttentionShape s{2, 2, 4};
  std::vector<float> k(4 * 8, 0.0f), v(4 * 8, 1.0f);
  const float col0[2][4] = {{kNaN, 3e38f, -3e38f, 2.0f}, {-3e38f, 1.0f, 2.0f, 3.0f}};
  for (size_t j = 0; j < 4; ++j)
    for (size_t g = 0; g < 2; ++g) k[j * 8 + g * 4] = col0[g][j];
  const std::vector<float> q = {10, 0, 0, 0, 10, 0, 0, 0};
  cpu::CpuBackend ref;
  cpu::CpuFastBackend fast(1);
  for (Backend* be : {static_cast<Backend*>(&ref), static_cast<Backend*>(&fast)}) {
    INFO((be == &ref ? "reference" : "fast"));
    const Both got = run_both(*be, q, k, v, s, {3}, BufferType::F32);
    // Per head: NaN and Inf counts, then max, min, sum, sum of squares of the finite scores.
    const float want[2][6] = {{1, 2, 10, 10, 10, 100}, {0, 1, 15, 5, 30, 350}};
    const int fields[6] = {kAttnStatNan, kAttnStatInf, kAttnStatMax,
                           kAttnStatMin, kAttnStatSum, kAttnStatSumSq};
    for (size_t h = 0; h < 2; ++h) {
      INFO("head " << h);
      const float* st = got.stats.data() + h * kAttnStatFields;
      for (size_t i = 0; i < 6; ++i) CHECK(st[fields[i]] == want[h][i]);
      CHECK(st[kAttnStatCount] == 4.0f);
      // Without a soft-cap the raw statistics are the same scores'.
      CHECK(st[kAttnStatRawMax] == st[kAttnStatMax]);
      CHECK(st[kAttnStatRawMin] == st[kAttnStatMin]);
      CHECK(st[kAttnStatRawNonFinite] == st[kAttnStatNan] + st[kAttnStatInf]);
    }
    CHECK(std::isnan(got.stats[kAttnStatEntropy]));  // head 0: the softmax itself is NaN
    const float* h1 = got.stats.data() + kAttnStatFields;
    // -inf gets weight 0; the rest is softmax(5, 10, 15) in double.
    const double z = std::exp(-10.0) + std::exp(-5.0) + 1.0;
    double ent = 0.0;
    for (const double x : {-10.0, -5.0, 0.0}) ent -= std::exp(x) / z * std::log(std::exp(x) / z);
    CHECK(h1[kAttnStatEntropy] == Approx(ent).margin(1e-6));
    CHECK(std::isnan(got.out[0]));  // a NaN score poisons the head's output, as it should
    CHECK(std::isfinite(got.out[4]));
  }
}

TEST_CASE("attention_with_stats with a soft-cap: scores after it, raw ones before it", "[cpu]") {
  // The layout of the NaN/Inf case above with softcap 8: head 0's raw scores NaN, +inf, -inf,
  // 10 become NaN, 8, -8, 8 tanh(10/8); head 1's -inf, 5, 10, 15 become -8 and 8 tanh(s/8).
  // A cap hides an overflow (+-inf -> +-8), so only the raw count shows it.
  AttentionShape s{2, 2, 4};
  s.softcap = 8.0f;
  std::vector<float> k(4 * 8, 0.0f), v(4 * 8, 1.0f);
  const float col0[2][4] = {{kNaN, 3e38f, -3e38f, 2.0f}, {-3e38f, 1.0f, 2.0f, 3.0f}};
  for (size_t j = 0; j < 4; ++j)
    for (size_t g = 0; g < 2; ++g) k[j * 8 + g * 4] = col0[g][j];
  const std::vector<float> q = {10, 0, 0, 0, 10, 0, 0, 0};
  const auto cap = [](double x) { return 8.0 * std::tanh(x / 8.0); };
  cpu::CpuBackend ref;
  cpu::CpuFastBackend fast(1);
  for (Backend* be : {static_cast<Backend*>(&ref), static_cast<Backend*>(&fast)}) {
    INFO((be == &ref ? "reference" : "fast"));
    const Both got = run_both(*be, q, k, v, s, {3}, BufferType::F32);
    // The same bits (head 0's output is NaN, which == would call unequal).
    CHECK(std::memcmp(got.out.data(), got.out_stats.data(), got.out.size() * sizeof(float)) == 0);
    const float* h0 = got.stats.data();
    CHECK(h0[kAttnStatNan] == 1.0f);
    CHECK(h0[kAttnStatInf] == 0.0f);  // +-inf were capped to +-8
    CHECK(h0[kAttnStatMax] == Approx(8.0).margin(1e-5));
    CHECK(h0[kAttnStatMin] == Approx(-8.0).margin(1e-5));
    CHECK(h0[kAttnStatRawNonFinite] == 3.0f);
    CHECK(h0[kAttnStatRawMax] == 10.0f);
    CHECK(h0[kAttnStatRawMin] == 10.0f);
    const float* h1 = got.stats.data() + kAttnStatFields;
    CHECK(h1[kAttnStatNan] + h1[kAttnStatInf] == 0.0f);
    CHECK(h1[kAttnStatMax] == Approx(cap(15.0)).margin(1e-5));
    CHECK(h1[kAttnStatMin] == Approx(-8.0).margin(1e-5));
    CHECK(h1[kAttnStatSum] == Approx(-8.0 + cap(5.0) + cap(10.0) + cap(15.0)).margin(1e-4));
    CHECK(h1[kAttnStatRawNonFinite] == 1.0f);
    CHECK(h1[kAttnStatRawMax] == 15.0f);
    CHECK(h1[kAttnStatRawMin] == 5.0f);

    // Folded: the capped-away overflow still alerts, and the table shows raw_max.
    const int32_t pos[] = {3}, seq[] = {0}, tok[] = {7};
    AttnStatsCollector c(1, 2, std::nullopt, 8.0);
    c.on_attention_stats(0, ObservedBatch{1, seq, pos, tok}, got.stats.data(), 2);
    REQUIRE(c.alert());
    CHECK(c.alert()->kind == AttnAlert::Kind::NonFiniteScore);
    CHECK(c.alert()->head == 0);
    CHECK(c.alert()->value == 3.0);
    CHECK(c.head(0, 1).raw_max == 15.0);
    CHECK(c.head(0, 1).max == Approx(cap(15.0)).margin(1e-5));
    CHECK(c.head(0, 1).n_raw_nonfinite == 1);
    CHECK(attn_stats_table(c).find("raw_max") != std::string::npos);
    const nlohmann::json j = attn_stats_json(c);
    CHECK(j["softcap"] == 8.0);
    CHECK(j["layers"][0]["raw_max"] == 15.0);
    CHECK(j["layers"][0]["raw_nonfinite"] == 4);
  }
}

TEST_CASE("attention_with_stats: same out bits, batch/thread invariant, fast ~ reference",
          "[cpu]") {
  std::mt19937 rng(17);
  const AttentionShape s{4, 2, 12};  // head_dim 12: the fast kernel's 8-lane body and a tail
  const int64_t kv_dim = 24;
  const std::vector<int32_t> positions = {7, 2, 5, 0};
  const std::vector<float> k = normal(rng, 8 * kv_dim, 1.5f), v = normal(rng, 8 * kv_dim, 1.0f);
  const std::vector<float> q = normal(rng, 4 * 48, 1.5f);
  cpu::CpuBackend ref;
  cpu::CpuFastBackend fast1(1), fast3(3);
  for (const BufferType type : {BufferType::F32, BufferType::F16}) {
    INFO(buffer_type_name(type));
    std::vector<Both> all;
    for (Backend* be : {static_cast<Backend*>(&ref), static_cast<Backend*>(&fast1),
                        static_cast<Backend*>(&fast3)}) {
      Both b = run_both(*be, q, k, v, s, positions, type);
      CHECK(b.out == b.out_stats);
      // Each token alone gives the same statistics bits as in the batch.
      for (size_t t = 0; t < positions.size(); ++t) {
        const std::vector<float> qt(q.begin() + static_cast<long>(t * 48),
                                    q.begin() + static_cast<long>((t + 1) * 48));
        const Both one = run_both(*be, qt, k, v, s, {positions[t]}, type);
        const auto row = static_cast<long>(t * 4 * kAttnStatFields);
        CHECK(one.stats == std::vector<float>(b.stats.begin() + row,
                                              b.stats.begin() + row + 4 * kAttnStatFields));
      }
      all.push_back(std::move(b));
    }
    CHECK(all[1].stats == all[2].stats);  // 1 vs 3 threads: the same bits
    // Reference vs fast: the same scores up to summation order in the dot products.
    for (size_t i = 0; i < all[0].stats.size(); ++i)
      CHECK(all[1].stats[i] == Approx(all[0].stats[i]).epsilon(1e-5).margin(1e-4));
  }
}

TEST_CASE("AttnStatsCollector folds rows and keeps the first alert", "[cpu]") {
  // Two layers, two heads, a chunk of two tokens at positions 0 and 1. Each row's fields
  // are written from a list of scores, and the folded mean/std are checked against the
  // scores pooled directly.
  const auto row = [](std::vector<float> sc, int nan, int inf, float entropy) {
    std::vector<float> r(kAttnStatFields, 0.0f);
    r[kAttnStatMax] = sc.empty() ? -kInf : *std::max_element(sc.begin(), sc.end());
    r[kAttnStatMin] = sc.empty() ? kInf : *std::min_element(sc.begin(), sc.end());
    for (const float x : sc) {
      r[kAttnStatSum] += x;
      r[kAttnStatSumSq] += x * x;
    }
    r[kAttnStatNan] = static_cast<float>(nan);
    r[kAttnStatInf] = static_cast<float>(inf);
    r[kAttnStatEntropy] = entropy;
    r[kAttnStatCount] = static_cast<float>(sc.size()) + static_cast<float>(nan + inf);
    r[kAttnStatRawMax] = r[kAttnStatMax];  // no soft-cap
    r[kAttnStatRawMin] = r[kAttnStatMin];
    r[kAttnStatRawNonFinite] = static_cast<float>(nan + inf);
    return r;
  };
  const auto concat = [](std::initializer_list<std::vector<float>> rows) {
    std::vector<float> out;
    for (const auto& r : rows) out.insert(out.end(), r.begin(), r.end());
    return out;
  };
  const int32_t pos[] = {0, 1}, seq[] = {0, 0}, tok[] = {5, 9};
  const ObservedBatch batch{2, seq, pos, tok};
  AttnStatsCollector c(2, 2, 3.5);
  // layer 0: (token 0: head 0 {1}, head 1 {2}); (token 1: head 0 {1, 3}, head 1 {4, -2})
  const std::vector<float> l0 = concat(
      {row({1}, 0, 0, 0), row({2}, 0, 0, 0), row({1, 3}, 0, 0, 0.5f), row({4, -2}, 0, 0, 0.25f)});
  // layer 1: token 1 head 1 holds a NaN (after layer 0's max 4 > 3.5 already alerted)
  const std::vector<float> l1 = concat({row({0.5f}, 0, 0, 0), row({0.5f}, 0, 0, 0),
                                        row({0.5f, 1}, 0, 0, 0.6f), row({2}, 1, 0, kNaN)});
  const float emb[] = {0.5f, -2.0f, 1.0f, 0.25f};  // (2 tokens, n_embd 2)
  const float x1[] = {1.0f, kNaN, 3.0f, -7.0f};    // layer 1: token 0 non-finite
  c.on_residual(-1, batch, emb, 2);
  c.on_attention_stats(0, batch, l0.data(), 2);
  c.on_residual(0, batch, emb, 2);
  c.on_attention_stats(1, batch, l1.data(), 2);
  c.on_residual(1, batch, x1, 2);

  CHECK(c.n_tokens() == 2);
  const AttnHeadStats& h01 = c.head(0, 1);  // scores {2, 4, -2}
  CHECK(h01.max == 4.0);
  CHECK(h01.max_pos == 1);
  CHECK(h01.min == -2.0);
  CHECK(h01.mean() == Approx(4.0 / 3.0));
  const double var01 = (4.0 + 16.0 + 4.0) / 3.0 - (4.0 / 3.0) * (4.0 / 3.0);
  CHECK(h01.std() == Approx(std::sqrt(var01)));
  CHECK(h01.mean_entropy() == Approx(0.125));
  CHECK(h01.mean_uniform_entropy() == Approx(std::log(2.0) / 2.0));  // ln 1 and ln 2
  const AttnHeadStats l0m = c.layer(0);  // all of layer 0: {1, 2, 1, 3, 4, -2}
  CHECK(l0m.max == 4.0);
  CHECK(l0m.max_head == 1);
  CHECK(l0m.mean() == Approx(9.0 / 6.0));
  CHECK(l0m.n_queries == 4);
  const AttnHeadStats& h11 = c.head(1, 1);
  CHECK(h11.n_nan == 1);
  CHECK(h11.n_finite == 2);
  CHECK(h11.n_entropy == 1);  // the NaN entropy is left out of the mean
  CHECK(c.residual(-1).abs_max == 2.0);
  CHECK(c.residual(1).abs_max == 7.0);
  CHECK(c.residual(1).abs_max_pos == 1);
  CHECK(c.residual(1).n_nonfinite == 1);
  REQUIRE(c.first_nonfinite_residual_layer());
  CHECK(*c.first_nonfinite_residual_layer() == 1);
  // The first alert is layer 0's 4 > 3.5 at token 1, head 1; the later NaNs do not replace it.
  REQUIRE(c.alert());
  CHECK(c.alert()->kind == AttnAlert::Kind::ScoreMax);
  CHECK(c.alert()->layer == 0);
  CHECK(c.alert()->head == 1);
  CHECK(c.alert()->pos == 1);
  CHECK(c.alert()->token == 9);
  CHECK(attn_alert_text(*c.alert(), 3.5) ==
        "layer 0 head 1 position 1 (token id 9): scaled score 4 > --attn-alert 3.5");

  // A threshold above every score: the NaN score of layer 1 is the first alert.
  AttnStatsCollector d(2, 2, 100.0);
  d.on_attention_stats(0, batch, l0.data(), 2);
  d.on_attention_stats(1, batch, l1.data(), 2);
  REQUIRE(d.alert());
  CHECK(d.alert()->kind == AttnAlert::Kind::NonFiniteScore);
  CHECK(d.alert()->layer == 1);
  CHECK(d.alert()->head == 1);
  const nlohmann::json j = attn_stats_json(d);
  CHECK(j["alert"]["kind"] == "nonfinite_score");
  CHECK(j["layers"][1]["nan"] == 1);
  CHECK(j["layers"][0]["heads"][1]["max"] == 4.0);
  CHECK(j["first_nonfinite_residual_layer"].is_null());
  CHECK(j["alert_threshold"] == 100.0);
  CHECK_THROWS(AttnStatsCollector(2, 2, std::nan("")));

  // No threshold (the default): large finite scores never alert, only the NaN does; scores
  // above ln(65504) are counted as the fp16 risk, the first by (layer, position, head).
  const std::vector<float> big = concat({row({1}, 0, 0, 0), row({12}, 0, 0, 0),
                                         row({11.5f, 30}, 0, 0, 0.5f), row({4, -2}, 0, 0, 0.25f)});
  AttnStatsCollector e(2, 2);
  e.on_attention_stats(0, batch, big.data(), 2);
  CHECK(!e.alert());
  const Fp16Risk risk = e.fp16_risk();
  CHECK(risk.rows == 2);
  CHECK(risk.of_rows == 4);
  CHECK(risk.largest == 30.0);
  CHECK(risk.layer == 0);
  CHECK(risk.pos == 0);
  CHECK(risk.head == 1);
  CHECK(e.head(0, 0).n_fp16_risk == 1);
  CHECK(attn_stats_table(e).find("info: 2 of 4 (token, head) rows have a max score above "
                                 "ln(65504) = 11.09") != std::string::npos);
  e.on_attention_stats(1, batch, l1.data(), 2);
  REQUIRE(e.alert());
  CHECK(e.alert()->kind == AttnAlert::Kind::NonFiniteScore);
  const nlohmann::json je = attn_stats_json(e);
  CHECK(je["alert_threshold"].is_null());
  CHECK(je["fp16_risk"]["rows"] == 2);
  CHECK(je["fp16_risk"]["head"] == 1);
  CHECK(je["layers"][0]["fp16_risk_rows"] == 2);
}

TEST_CASE("stories260K: stats cover every query: a planted NaN is traced to its layer", "[cpu]") {
  const GgufFile f = GgufFile::open(llmctl::test::require_test_file("models/stories260K.gguf"));
  const ModelConfig c = config_from_gguf(f);
  ModelWeights w = bind_weights(f, c);
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378};
  GenerateOptions g;
  g.n_ctx = 64;
  g.n_predict = 12;
  cpu::CpuFastBackend backend(2);
  ForwardOptions fo;
  fo.kv.n_blocks = 4;       // 64 positions
  fo.max_batch_tokens = 4;  // the prompt in two chunks

  // Clean run: the same ids with and without the observer; counts add up.
  Forward plain(c, w, backend, fo);
  const GenerateResult r0 = generate(plain, prompt, g);
  Forward fwd(c, w, backend, fo);
  AttnStatsCollector stats(c.n_layers, c.n_heads, 15.0);
  fwd.set_observer(&stats);
  const GenerateResult r = generate(fwd, prompt, g);
  CHECK(r.generated_ids == r0.generated_ids);
  CHECK(r.last_logits_hash == r0.last_logits_hash);
  // Fed: the prompt and every generated token but the last, at positions 0 .. n-1, each
  // attending to positions 0 .. p: n(n+1)/2 scores per head.
  const auto n = static_cast<int64_t>(prompt.size() + r.generated_ids.size()) - 1;
  CHECK(stats.n_tokens() == n);
  for (int64_t l = 0; l < c.n_layers; ++l)
    for (int64_t h = 0; h < c.n_heads; ++h) {
      const AttnHeadStats& a = stats.head(l, h);
      CHECK(a.n_queries == n);
      CHECK(a.n_finite == n * (n + 1) / 2);
      CHECK(a.n_nan + a.n_inf == 0);
      CHECK(a.min <= a.mean());
      CHECK(a.mean() <= a.max);
      CHECK(a.mean_entropy() >= 0.0);
      CHECK(a.mean_entropy() <= a.mean_uniform_entropy() + 1e-6);
    }
  CHECK(!stats.first_nonfinite_residual_layer());
  CHECK(stats.residual(c.n_layers - 1).abs_max > 0.0);
  // The whole prompt in one chunk instead of two: every (token, head) row has the same bits
  // (batch invariance) and is folded in the same order, so the totals are identical.
  ForwardOptions one_chunk = fo;
  one_chunk.max_batch_tokens = 64;
  Forward fwd1(c, w, backend, one_chunk);
  AttnStatsCollector stats1(c.n_layers, c.n_heads, 15.0);
  fwd1.set_observer(&stats1);
  generate(fwd1, prompt, g);
  for (int64_t l = 0; l < c.n_layers; ++l) {
    CHECK(stats1.residual(l).abs_max == stats.residual(l).abs_max);
    for (int64_t h = 0; h < c.n_heads; ++h) {
      const AttnHeadStats &a = stats.head(l, h), &b = stats1.head(l, h);
      CHECK(b.max == a.max);
      CHECK(b.min == a.min);
      CHECK(b.sum == a.sum);
      CHECK(b.sum_sq == a.sum_sq);
      CHECK(b.entropy_sum == a.entropy_sum);
    }
  }

  // One NaN in layer 2's attn_q weights: scores of layer 2 become NaN, layers 0-1 stay clean.
  LayerWeights& l2 = w.layers[2];
  REQUIRE(l2.wq.type == GgmlType::F32);
  std::vector<float> wq(static_cast<size_t>(l2.wq.n_cols * l2.wq.n_rows));
  std::memcpy(wq.data(), l2.wq.data, wq.size() * sizeof(float));
  wq[0] = kNaN;  // row 0: query dimension 0 of head 0
  l2.wq.data = wq.data();
  const AttnStatsCollector bs = observed_run(c, w, backend, fo, prompt, g, 1e9);
  REQUIRE(bs.alert());
  CHECK(bs.alert()->kind == AttnAlert::Kind::NonFiniteScore);
  CHECK(bs.alert()->layer == 2);
  CHECK(bs.alert()->head == 0);
  CHECK(bs.alert()->pos == 0);
  CHECK(bs.head(2, 0).n_nan > 0);
  CHECK(bs.head(1, 0).n_nan == 0);
  REQUIRE(bs.first_nonfinite_residual_layer());
  CHECK(*bs.first_nonfinite_residual_layer() == 2);
  CHECK(bs.residual(1).n_nonfinite == 0);
}

TEST_CASE("SmolLM2: no alert on a healthy run, a planted NaN still alerts in its layer", "[cpu]") {
  const GgufFile f =
      GgufFile::open(llmctl::test::require_test_file("models/SmolLM2-135M-Instruct.Q4_1.gguf"));
  const ModelConfig c = config_from_gguf(f);
  ModelWeights w = bind_weights(f, c);
  const std::vector<int32_t> prompt = {1, 504, 3458, 282, 4649, 314};
  GenerateOptions g;
  g.n_ctx = 32;
  g.n_predict = 4;
  cpu::CpuFastBackend backend(2);
  ForwardOptions fo;
  fo.kv.n_blocks = 2;
  fo.kv.type = KvType::F16;  // as `run` does by default
  const AttnStatsCollector stats = observed_run(c, w, backend, fo, prompt, g);  // no threshold
  CHECK(!stats.alert());
  // Real scores pass ln(65504) (SmolLM2 reaches ~16 by layer 7): information only.
  CHECK(stats.fp16_risk().rows > 0);
  CHECK(stats.fp16_risk().largest > kFp16SoftmaxLimit);

  // A NaN block scale in layer 3's attn_q (row 0, block 0: query dimensions 0-31 of head 0).
  LayerWeights& l3 = w.layers[3];
  REQUIRE((l3.wq.type == GgmlType::Q4_1 || l3.wq.type == GgmlType::Q4_0 ||
           l3.wq.type == GgmlType::Q8_0));  // blocks that start with an f16 scale
  std::vector<uint8_t> wq(weight_row_bytes(l3.wq.type, l3.wq.n_cols) *
                          static_cast<size_t>(l3.wq.n_rows));
  std::memcpy(wq.data(), l3.wq.data, wq.size());
  wq[0] = 0x00;
  wq[1] = 0x7e;  // f16 quiet NaN, little-endian
  l3.wq.data = wq.data();
  const AttnStatsCollector bs = observed_run(c, w, backend, fo, prompt, g);
  REQUIRE(bs.alert());
  CHECK(bs.alert()->kind == AttnAlert::Kind::NonFiniteScore);
  CHECK(bs.alert()->layer == 3);
  CHECK(bs.alert()->head == 0);
  CHECK(bs.alert()->pos == 0);
  CHECK(bs.head(2, 0).n_nan == 0);
}
