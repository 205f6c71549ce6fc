// The mixture-of-experts ops of backend.h (moe_route, moe_gather, moe_scatter, moe_combine,
// sigmoid_scale_rows) on the CPU reference backend and the fast one (which inherits them),
// against float64 computations written here; ties and NaN in routing; the seam's checks.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_fast_backend.h"
#include "core/error.h"
#include "support/backend_buffers.h"
#include "support/random_data.h"

using namespace llmctl;
using Catch::Matchers::Contains;
using llmctl::test::make;
using llmctl::test::make_ids;
using llmctl::test::random_floats;
using llmctl::test::read;

namespace {

std::vector<std::unique_ptr<Backend>> backends() {
  std::vector<std::unique_ptr<Backend>> v;
  v.push_back(std::make_unique<cpu::CpuBackend>());
  v.push_back(std::make_unique<cpu::CpuFastBackend>(2));
  return v;
}

std::vector<int32_t> read_ids(Backend& b, const Buffer& buf) {
  std::vector<int32_t> v(static_cast<size_t>(buf.size()));
  b.download(buf, v.data(), buf.size());
  return v;
}

// Router in float64: softmax, the k largest (lower expert first on ties), optionally
// renormalised.
void route_f64(const std::vector<float>& logits, int64_t n_tokens, int64_t n_expert, int64_t k,
               bool normalize, std::vector<int32_t>& ids, std::vector<double>& weights) {
  ids.clear();
  weights.clear();
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* l = logits.data() + t * n_expert;
    double mx = -std::numeric_limits<double>::infinity();
    for (int64_t e = 0; e < n_expert; ++e) mx = std::max(mx, static_cast<double>(l[e]));
    std::vector<double> p(static_cast<size_t>(n_expert));
    double sum = 0.0;
    for (int64_t e = 0; e < n_expert; ++e)
      sum += p[static_cast<size_t>(e)] = std::exp(static_cast<double>(l[e]) - mx);
    for (double& x : p) x /= sum;
    std::vector<int32_t> order(static_cast<size_t>(n_expert));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return p[static_cast<size_t>(a)] > p[static_cast<size_t>(b)];
    });
    double chosen = 0.0;
    for (int64_t r = 0; r < k; ++r) chosen += p[static_cast<size_t>(order[static_cast<size_t>(r)])];
    for (int64_t r = 0; r < k; ++r) {
      const int32_t e = order[static_cast<size_t>(r)];
      ids.push_back(e);
      weights.push_back(p[static_cast<size_t>(e)] / (normalize ? chosen : 1.0));
    }
  }
}

}  // namespace

TEST_CASE("moe ops: moe_route matches a float64 router", "[cpu]") {
  std::mt19937 rng(7);
  const int64_t n_tokens = 9, n_expert = 8;
  const std::vector<float> logits =
      random_floats(rng, static_cast<size_t>(n_tokens * n_expert), 2.0f);
  for (const auto& be : backends()) {
    for (const int64_t k : {1, 2, 4, 8}) {
      for (const bool normalize : {false, true}) {
        INFO(be->name() << " k " << k << " normalize " << normalize);
        std::vector<int32_t> want_ids;
        std::vector<double> want_w;
        route_f64(logits, n_tokens, n_expert, k, normalize, want_ids, want_w);
        Buffer l = make(*be, logits);
        Buffer ids = be->alloc(n_tokens * k, BufferType::I32);
        Buffer w = be->alloc(n_tokens * k);
        be->moe_route(l, n_tokens, n_expert, k, normalize, ids, w);
        CHECK(read_ids(*be, ids) == want_ids);
        const std::vector<float> got = read(*be, w);
        for (size_t i = 0; i < got.size(); ++i)
          CHECK(static_cast<double>(got[i]) == Approx(want_w[i]).epsilon(1e-6));
      }
    }
  }
}

TEST_CASE("moe ops: moe_route ties pick the lower expert; a NaN logit is not hidden", "[cpu]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // Row 0: all equal. Row 1: experts 2 and 3 tie for the top. Row 2: a NaN logit.
  const std::vector<float> logits = {0.5f, 0.5f, 0.5f, 0.5f,  //
                                     1.0f, 0.0f, 3.0f, 3.0f,  //
                                     1.0f, nan,  2.0f, 0.0f};
  for (const auto& be : backends()) {
    INFO(be->name());
    Buffer l = make(*be, logits);
    Buffer ids = be->alloc(3 * 2, BufferType::I32);
    Buffer w = be->alloc(3 * 2);
    be->moe_route(l, 3, 4, 2, /*normalize=*/true, ids, w);
    const std::vector<int32_t> got = read_ids(*be, ids);
    const std::vector<float> wt = read(*be, w);
    CHECK(std::vector<int32_t>(got.begin(), got.begin() + 4) == std::vector<int32_t>{0, 1, 2, 3});
    CHECK(wt[0] == 0.5f);
    CHECK(wt[1] == 0.5f);
    CHECK(wt[2] == wt[3]);
    // The NaN spreads through the row's softmax: two distinct valid experts, NaN weights (the
    // output then shows the NaN, as llama.cpp's would).
    CHECK(got[4] != got[5]);
    for (const int32_t e : {got[4], got[5]}) CHECK((e >= 0 && e < 4));
    CHECK(std::isnan(wt[4]));
    CHECK(std::isnan(wt[5]));
  }
}

TEST_CASE("moe ops: gather, scatter and combine move and weight rows exactly", "[cpu]") {
  std::mt19937 rng(3);
  const int64_t n_tokens = 5, k = 3, n_cols = 7;
  const std::vector<float> x = random_floats(rng, static_cast<size_t>(n_tokens * n_cols));
  const std::vector<float> weights = random_floats(rng, static_cast<size_t>(n_tokens * k));
  // Slots (t * k + r) in some order; the op reads [offset, offset + m).
  const std::vector<int32_t> slots = {14, 0, 7, 5, 9, 3, 12, 1, 8, 2, 13, 4, 6, 10, 11};
  for (const auto& be : backends()) {
    INFO(be->name());
    Buffer xb = make(*be, x);
    Buffer sb = make_ids(*be, slots);
    Buffer g = be->alloc(4 * n_cols);
    be->moe_gather(xb, n_cols, sb, 2, 4, k, g);  // slots 7, 5, 9, 3: tokens 2, 1, 3, 1
    const std::vector<float> got = read(*be, g);
    const int32_t tok[] = {2, 1, 3, 1};
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t c = 0; c < n_cols; ++c)
        CHECK(got[static_cast<size_t>(i * n_cols + c)] ==
              x[static_cast<size_t>(tok[i] * n_cols + c)]);

    // Scatter every slot's row (its values say which slot it is), in two groups.
    std::vector<float> y(static_cast<size_t>(n_tokens * k * n_cols));
    for (size_t i = 0; i < slots.size(); ++i)
      for (int64_t c = 0; c < n_cols; ++c)
        y[i * static_cast<size_t>(n_cols) + static_cast<size_t>(c)] =
            static_cast<float>(slots[i]) + 0.01f * static_cast<float>(c);
    Buffer yb = make(*be, y);
    Buffer ys = be->alloc(n_tokens * k * n_cols);
    Buffer first = make(*be, std::vector<float>(y.begin(), y.begin() + 6 * n_cols));
    Buffer rest = make(*be, std::vector<float>(y.begin() + 6 * n_cols, y.end()));
    be->moe_scatter(first, n_cols, sb, 0, 6, ys);
    be->moe_scatter(rest, n_cols, sb, 6, 9, ys);
    const std::vector<float> in_slots = read(*be, ys);
    for (int64_t s = 0; s < n_tokens * k; ++s)
      for (int64_t c = 0; c < n_cols; ++c)
        CHECK(in_slots[static_cast<size_t>(s * n_cols + c)] ==
              static_cast<float>(s) + 0.01f * static_cast<float>(c));

    // Combine: each product rounded to f32, added in rank order (bits), near the f64 sum.
    Buffer wb = make(*be, weights);
    Buffer out = be->alloc(n_tokens * n_cols);
    be->moe_combine(ys, wb, n_tokens, k, n_cols, out);
    const std::vector<float> comb = read(*be, out);
    for (int64_t t = 0; t < n_tokens; ++t)
      for (int64_t c = 0; c < n_cols; ++c) {
        float f = 0.0f;
        double d = 0.0;
        for (int64_t r = 0; r < k; ++r) {
          const float w = weights[static_cast<size_t>(t * k + r)];
          const float v = in_slots[static_cast<size_t>((t * k + r) * n_cols + c)];
          const float prod = w * v;
          f = r == 0 ? prod : f + prod;
          d += static_cast<double>(w) * static_cast<double>(v);
        }
        const float o = comb[static_cast<size_t>(t * n_cols + c)];
        CHECK(o == f);
        CHECK(static_cast<double>(o) == Approx(d).epsilon(1e-5).margin(1e-5));
      }
  }
}

TEST_CASE("moe ops: sigmoid_scale_rows scales each row by sigmoid(gate)", "[cpu]") {
  std::mt19937 rng(5);
  const int64_t n_tokens = 4, n_cols = 6;
  const std::vector<float> x = random_floats(rng, static_cast<size_t>(n_tokens * n_cols));
  const std::vector<float> gate = {-3.0f, 0.0f, 0.7f, 20.0f};
  for (const auto& be : backends()) {
    INFO(be->name());
    Buffer xb = make(*be, x);
    Buffer gb = make(*be, gate);
    be->sigmoid_scale_rows(xb, gb, n_tokens, n_cols);
    const std::vector<float> got = read(*be, xb);
    for (int64_t t = 0; t < n_tokens; ++t) {
      const double s = 1.0 / (1.0 + std::exp(-static_cast<double>(gate[static_cast<size_t>(t)])));
      for (int64_t c = 0; c < n_cols; ++c) {
        const auto i = static_cast<size_t>(t * n_cols + c);
        CHECK(static_cast<double>(got[i]) ==
              Approx(static_cast<double>(x[i]) * s).epsilon(1e-6).margin(1e-7));
      }
    }
  }
}

TEST_CASE("moe ops: bad shapes and slots are errors naming the op", "[cpu]") {
  cpu::CpuBackend be;
  Buffer logits = be.alloc(2 * 4);
  Buffer ids = be.alloc(2 * 2, BufferType::I32);
  Buffer w = be.alloc(2 * 2);
  CHECK_THROWS_WITH(be.moe_route(logits, 2, 4, 5, true, ids, w),
                    Contains("moe_route: 5 experts per token of 4"));
  CHECK_THROWS_WITH(be.moe_route(logits, 2, 4, 0, true, ids, w), Contains("moe_route"));
  CHECK_THROWS_WITH(be.moe_route(logits, 3, 4, 2, true, ids, w), Contains("moe_route"));
  Buffer x = be.alloc(3 * 4);
  Buffer out = be.alloc(2 * 4);
  Buffer bad = make_ids(be, {0, 9 * 2});  // token 9 of 3
  CHECK_THROWS_WITH(be.moe_gather(x, 4, bad, 0, 2, 2, out), Contains("moe_gather: slot 18"));
  CHECK_THROWS_WITH(be.moe_gather(x, 4, bad, -1, 1, 2, out), Contains("negative"));
  CHECK_THROWS_WITH(be.moe_gather(x, 4, bad, 0, 2, 2, x), Contains("must not alias"));
  Buffer y = be.alloc(2 * 4);
  Buffer y_slots = be.alloc(6 * 4);
  CHECK_THROWS_WITH(be.moe_scatter(y, 4, bad, 0, 2, y_slots), Contains("moe_scatter: slot 18"));
  CHECK_THROWS_WITH(be.moe_combine(y_slots, w, 3, 2, 4, out), Contains("moe_combine"));
  CHECK_THROWS_WITH(be.sigmoid_scale_rows(out, w, 2, 0), Contains("sigmoid_scale_rows"));
}
