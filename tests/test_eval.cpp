// diag/eval*.h and diag/imatrix_collector.h: the KL / percentile arithmetic against direct
// long-double computations written here, the window plan's promise that every token is
// scored once, perplexity of stories260K against a step-by-step computation over logits from
// the public Forward API, and the importance matrix's layer-0 sums against rmsnorm of the
// embeddings computed here from the GGUF tensors.

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/selection.h"
#include "core/error.h"
#include "diag/builtin_text.h"
#include "diag/eval.h"
#include "diag/eval_metrics.h"
#include "diag/imatrix_collector.h"
#include "model/forward.h"
#include "model/model_loader.h"
#include "support/fixtures.h"
#include "support/test_data.h"
#include "tokenizer/tokenizer.h"

using namespace llmctl;

namespace {

using LD = long double;

std::vector<LD> softmax_ld(const std::vector<float>& logits) {
  LD mx = logits[0];
  for (float v : logits) mx = std::max(mx, static_cast<LD>(v));
  LD sum = 0;
  for (float v : logits) sum += std::exp(static_cast<LD>(v) - mx);
  std::vector<LD> p;
  for (float v : logits) p.push_back(std::exp(static_cast<LD>(v) - mx) / sum);
  return p;
}

std::vector<float> random_logits(std::mt19937& rng, size_t n, float scale) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

std::unique_ptr<Backend> cpu_backend() {
  BackendChoice c;
  c.device = "cpu";
  return make_backend(c);
}

}  // namespace

TEST_CASE("KL from the top-K summary equals the bucketed and the full KL computed directly",
          "[cpu]") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    const size_t n = 50;
    const std::vector<float> base = random_logits(rng, n, 3.0f);
    std::vector<float> model = base;
    const std::vector<float> noise = random_logits(rng, n, trial < 10 ? 0.05f : 1.0f);
    for (size_t j = 0; j < n; ++j) model[j] += noise[j];
    const std::vector<LD> p = softmax_ld(base), q = softmax_ld(model);
    LD full = 0;
    for (size_t j = 0; j < n; ++j) full += p[j] * std::log(p[j] / q[j]);

    std::vector<double> lp, lq;
    log_softmax(base.data(), static_cast<int64_t>(n), lp);
    log_softmax(model.data(), static_cast<int64_t>(n), lq);
    for (size_t j = 0; j < n; ++j) CHECK(std::exp(lp[j]) == Approx(static_cast<double>(p[j])));

    for (int k : {1, 5, 49, 50}) {
      BaseTopK b;
      b.k = k;
      append_top_k(lp, b);
      const PositionComparison c = compare_to_base(b, 0, lq);
      // The bucketed KL, computed here: the k largest p (ids sorted by p), then one tail.
      std::vector<size_t> order(n);
      for (size_t j = 0; j < n; ++j) order[j] = j;
      std::sort(order.begin(), order.end(), [&](size_t a, size_t bb) { return p[a] > p[bb]; });
      LD kl = 0, pt = 0, qt = 0;
      for (size_t i = 0; i < n; ++i) {
        const size_t j = order[i];
        if (i < static_cast<size_t>(k)) {
          kl += p[j] * std::log(p[j] / q[j]);
          CHECK(b.ids[i] == static_cast<int32_t>(j));
        } else {
          pt += p[j];
          qt += q[j];
        }
      }
      if (pt > 0) kl += pt * std::log(pt / qt);
      INFO("trial " << trial << " k " << k);
      CHECK(c.kl == Approx(static_cast<double>(kl)).epsilon(1e-9).margin(1e-15));
      CHECK(c.kl <= static_cast<double>(full) + 1e-12);  // the log-sum inequality
      if (k == 50) CHECK(c.kl == Approx(static_cast<double>(full)).epsilon(1e-9).margin(1e-15));
      CHECK(b.tail[0] == Approx(static_cast<double>(pt)).margin(1e-15));
      const size_t top = order[0];
      const size_t qtop = static_cast<size_t>(std::max_element(q.begin(), q.end()) - q.begin());
      CHECK(c.same_top == (qtop == top));
      CHECK(c.delta_p == Approx(static_cast<double>(q[top] - p[top])).margin(1e-15));
    }
  }
}

TEST_CASE("KL of a distribution against itself is 0 and its top tokens agree", "[cpu]") {
  std::mt19937 rng(3);
  const std::vector<float> l = random_logits(rng, 300, 5.0f);
  std::vector<double> lp;
  log_softmax(l.data(), 300, lp);
  BaseTopK b;
  b.k = 32;
  append_top_k(lp, b);
  const PositionComparison c = compare_to_base(b, 0, lp);
  CHECK(c.kl == Approx(0.0).margin(1e-15));
  CHECK(c.same_top);
  CHECK(c.delta_p == Approx(0.0).margin(1e-15));
}

TEST_CASE("summarize: mean, median and p99 as numpy.percentile (linear)", "[cpu]") {
  // numpy: percentile([1..5], 50) = 3, percentile([1..5], 99) = 1 + 0.99 * 4 = 4.96.
  Distribution d = summarize({5, 1, 4, 2, 3});
  CHECK(d.mean == Approx(3.0));
  CHECK(d.median == Approx(3.0));
  CHECK(d.p99 == Approx(4.96));
  CHECK(d.max == 5.0);
  d = summarize({0, 10, 10, 0});  // median between the middle two: 5
  CHECK(d.median == Approx(5.0));
  CHECK(d.p99 == Approx(10.0));
  CHECK(summarize({}).n == 0);
}

TEST_CASE("plan_windows scores every text token exactly once", "[cpu]") {
  for (bool bos : {true, false}) {
    for (int64_t n_text : {2, 3, 10, 31, 32, 33, 100}) {
      for (int64_t ctx : {2, 3, 8, 32, 1000}) {
        INFO("bos " << bos << " n_text " << n_text << " ctx " << ctx);
        const std::vector<EvalWindow> w = plan_windows(n_text, ctx, bos);
        std::vector<int> scored(static_cast<size_t>(n_text), 0);
        for (const EvalWindow& x : w) {
          CHECK(x.n + (bos ? 1 : 0) <= ctx);  // BOS takes one position
          CHECK(x.begin + x.n <= n_text);
          for (int64_t t = x.begin + (bos ? 0 : 1); t < x.begin + x.n; ++t)
            ++scored[static_cast<size_t>(t)];
          CHECK(n_scored(x, bos) == x.n - (bos ? 0 : 1));
        }
        for (int64_t t = 0; t < n_text; ++t)
          CHECK(scored[static_cast<size_t>(t)] == ((t == 0 && !bos) ? 0 : 1));
      }
    }
  }
  CHECK_THROWS_AS(plan_windows(10, 1, true), Error);
  CHECK_THROWS_AS(plan_windows(0, 8, true), Error);
  CHECK_THROWS_AS(plan_windows(1, 8, false), Error);
}

TEST_CASE("stories260K: eval perplexity equals a step-by-step computation over Forward logits",
          "[cpu]") {
  const LoadedModel m = load_model(test::require_test_file("models/stories260K.gguf"));
  const Tokenizer tok = Tokenizer::from_gguf(*m.gguf);
  const std::vector<int32_t> ids = tok.encode(builtin_text("stories"), false);
  REQUIRE(ids.size() > 100);
  const int64_t ctx = 48;
  const int32_t bos = tok.bos_id();
  REQUIRE(bos >= 0);
  const auto backend = cpu_backend();

  // Reference: windows of BOS + 47 text tokens, one step() at a time, log-softmax in long
  // double here.
  LD nll = 0;
  int64_t count = 0;
  {
    Forward fwd(m.config, m.weights, *backend, ctx);
    for (size_t b = 0; b < ids.size(); b += static_cast<size_t>(ctx - 1)) {
      fwd.reset();
      std::vector<float> logits = fwd.step(bos);
      for (size_t t = b; t < std::min(ids.size(), b + static_cast<size_t>(ctx - 1)); ++t) {
        nll -= std::log(softmax_ld(logits)[static_cast<size_t>(ids[t])]);
        ++count;
        logits = fwd.step(ids[t]);
      }
    }
  }
  REQUIRE(count == static_cast<int64_t>(ids.size()));
  const double ref_ppl = std::exp(static_cast<double>(nll / count));

  Forward fwd(m.config, m.weights, *backend, ctx);
  const auto windows = plan_windows(static_cast<int64_t>(ids.size()), ctx, true);
  const EvalResult r = evaluate(fwd, ids, bos, windows, nullptr, nullptr, {});
  CHECK(r.n_scored == count);
  WARN("stories260K ppl over the built-in text, ctx 48: " << r.ppl << " (reference " << ref_ppl
                                                          << ")");
  CHECK(r.ppl == Approx(ref_ppl).epsilon(1e-5));
  // A trained model: far better than uniform over 512 tokens.
  CHECK(r.ppl < 100.0);

  // The model against itself, through the top-K path.
  BaseTopK top;
  Forward fb(m.config, m.weights, *backend, ctx);
  const EvalResult br = collect_base(fb, ids, bos, windows, 32, top, {});
  CHECK(br.ppl == Approx(r.ppl).epsilon(1e-9));
  const EvalResult self = evaluate(fwd, ids, bos, windows, &top, &br, {});
  CHECK(self.kl.max == Approx(0.0).margin(1e-9));
  CHECK(self.top1_agreement == 1.0);
}

TEST_CASE("imatrix collector: rows per weight, layer-0 sums equal rmsnorm(embedding) squared",
          "[cpu]") {
  const LoadedModel m = load_model(test::require_test_file("models/stories260K.gguf"));
  const ModelConfig& c = m.config;
  const auto backend = cpu_backend();
  Forward fwd(c, m.weights, *backend, 64);
  ImportanceMatrix im;
  ImatrixCollector col(im);
  fwd.set_observer(&col);
  const std::vector<int32_t> toks = {1, 403, 13, 70, 11, 300, 29, 5, 88, 12};
  const int64_t n = static_cast<int64_t>(toks.size());
  REQUIRE(fwd.cache().reserve(0, n) == Reserve::Ok);
  std::vector<BatchToken> batch;
  for (int64_t i = 0; i < n; ++i) batch.push_back({0, toks[static_cast<size_t>(i)], i >= n - 3});
  fwd.decode(batch);

  for (int64_t l = 0; l < c.n_layers; ++l)
    for (const char* w :
         {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"}) {
      const std::string name = "blk." + std::to_string(l) + "." + w + ".weight";
      INFO(name);
      REQUIRE(im.entries.count(name) == 1);
      CHECK(im.entries.at(name).n_rows == n);
    }
  REQUIRE(im.entries.count("output.weight") == 1);
  CHECK(im.entries.at("output.weight").n_rows == 3);  // the rows whose logits were asked for
  CHECK(im.entries.size() == static_cast<size_t>(7 * c.n_layers + 1));
  CHECK(im.entries.at("blk.0.ffn_down.weight").sum_sq.size() == static_cast<size_t>(c.n_ff));

  // Layer 0's attention input, computed here: rmsnorm(token_embd[t]) * attn_norm.
  const GgufTensorInfo* emb = m.gguf->find_tensor("token_embd.weight");
  const GgufTensorInfo* norm = m.gguf->find_tensor("blk.0.attn_norm.weight");
  REQUIRE(emb != nullptr);
  REQUIRE(norm != nullptr);
  REQUIRE(emb->type == GgmlType::F32);
  const int64_t d = c.n_embd;
  std::vector<float> e(static_cast<size_t>(emb->n_elements())), g(static_cast<size_t>(d));
  std::memcpy(e.data(), emb->data, e.size() * sizeof(float));
  std::memcpy(g.data(), norm->data, g.size() * sizeof(float));
  std::vector<double> want(static_cast<size_t>(d), 0.0);
  for (int32_t t : toks) {
    const float* x = e.data() + static_cast<size_t>(t) * static_cast<size_t>(d);
    double ss = 0;
    for (int64_t j = 0; j < d; ++j) ss += double(x[j]) * double(x[j]);
    const double inv = 1.0 / std::sqrt(ss / double(d) + double(c.rms_eps));
    for (int64_t j = 0; j < d; ++j) {
      const double h = double(x[j]) * inv * double(g[static_cast<size_t>(j)]);
      want[static_cast<size_t>(j)] += h * h;
    }
  }
  for (const char* w : {"blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight"}) {
    const auto& got = im.entries.at(w).sum_sq;
    REQUIRE(got.size() == want.size());
    for (size_t j = 0; j < want.size(); ++j) CHECK(got[j] == Approx(want[j]).epsilon(1e-4));
  }
}

TEST_CASE("imatrix collector: a fused QKV or gate/up tensor (phi3) counts its input once",
          "[cpu]") {
  const LoadedModel m = load_model(test::fixture_path("family_phi3/model.gguf"));
  const ModelConfig& c = m.config;
  REQUIRE(c.fused_qkv);
  REQUIRE(c.fused_gate_up);
  const auto backend = cpu_backend();
  Forward fwd(c, m.weights, *backend, 64);
  ImportanceMatrix im;
  ImatrixCollector col(im);
  fwd.set_observer(&col);
  const int64_t n = 6;
  REQUIRE(fwd.cache().reserve(0, n) == Reserve::Ok);
  std::vector<BatchToken> batch;
  for (int64_t i = 0; i < n; ++i) batch.push_back({0, static_cast<int32_t>(3 + 7 * i), i == n - 1});
  fwd.decode(batch);
  for (int64_t l = 0; l < c.n_layers; ++l)
    for (const char* w : {"attn_qkv", "attn_output", "ffn_up", "ffn_down"}) {
      const std::string name = "blk." + std::to_string(l) + "." + w + ".weight";
      INFO(name);
      REQUIRE(im.entries.count(name) == 1);
      CHECK(im.entries.at(name).n_rows == n);  // was 3 n (QKV) and 2 n (gate/up)
    }
  CHECK(im.entries.size() == static_cast<size_t>(4 * c.n_layers + 1));
}
