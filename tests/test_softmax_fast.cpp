// The fast attention's softmax (src/backend/cpu/softmax_fast.h): its exp against double exp
// over the whole range softmax uses, the special values, and the softmax against the
// reference definition (core/softmax.h) computed in double.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "backend/cpu/attention_fast.h"
#include "backend/cpu/softmax_fast.h"
#include "core/softmax.h"

using namespace llmctl;
using namespace llmctl::cpu;

namespace {

bool have_avx2() {
  if (attention_fast_available()) return true;
  WARN("no AVX2+FMA+F16C on this CPU: the fast softmax is not used here, nothing to test");
  return false;
}

}  // namespace

TEST_CASE("exp_fast: within 4 float ulps of exp from -87 to 0, 0 below, NaN stays NaN", "[cpu]") {
  if (!have_avx2()) return;
  std::vector<float> x;
  for (float v = -87.0f; v <= 0.0f; v += 0.000731f) x.push_back(v);
  x.push_back(0.0f);
  x.push_back(-0.0f);
  x.push_back(-1e-30f);
  std::vector<float> y(x.size());
  exp_fast(x.data(), static_cast<int64_t>(x.size()), y.data());
  double worst = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double exact = std::exp(static_cast<double>(x[i]));
    const double ulp = std::ldexp(1.0, std::ilogb(exact) - 23);
    worst = std::max(worst, std::fabs(double{y[i]} - exact) / ulp);
  }
  INFO("worst error " << worst << " ulps over " << x.size() << " points");
  CHECK(worst <= 4.0);
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> special = {0.0f, -88.0f, -1000.0f, -inf, std::nanf(""), -87.0f, -1.0f};
  std::vector<float> ys(special.size());
  exp_fast(special.data(), static_cast<int64_t>(special.size()), ys.data());  // a tail of 7
  CHECK(ys[0] == 1.0f);
  CHECK(ys[1] == 0.0f);
  CHECK(ys[2] == 0.0f);
  CHECK(ys[3] == 0.0f);
  CHECK(std::isnan(ys[4]));
  CHECK(ys[5] > 0.0f);
  CHECK(std::fabs(double{ys[6]} - std::exp(-1.0)) <= 4 * std::ldexp(1.0, -25));
}

TEST_CASE("softmax_fast: the softmax definition within float rounding, any length", "[cpu]") {
  if (!have_avx2()) return;
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 4.0f);
  for (int64_t n : {1, 2, 7, 8, 9, 31, 64, 1000, 4099}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = dist(rng);
    if (n > 3) x[2] = -std::numeric_limits<float>::infinity();  // a masked entry gives 0
    std::vector<float> fast = x;
    softmax_fast(fast.data(), n);
    // exp of the float difference x - max, as the definition computes it (that subtraction's
    // rounding, up to 2^-24 |x - max|, is part of every float softmax)
    float mx = -INFINITY;
    for (float v : x) mx = std::max(mx, v);
    double sum = 0.0;
    for (float v : x) sum += std::exp(double{v - mx});
    double total = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      const double exact = std::exp(double{x[static_cast<size_t>(i)] - mx}) / sum;
      const double got = fast[static_cast<size_t>(i)];
      INFO("n " << n << " i " << i);
      CHECK(std::fabs(got - exact) <= 1e-6 * exact + 1e-30);
      total += got;
    }
    CHECK(std::fabs(total - 1.0) < 1e-5);
    if (n > 3) CHECK(fast[2] == 0.0f);
    // and the reference implementation agrees to the same rounding
    std::vector<float> ref = x;
    softmax_inplace(ref.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const double got = fast[static_cast<size_t>(i)], want = ref[static_cast<size_t>(i)];
      CHECK(std::fabs(got - want) <= 2e-6 * want + 1e-30);
    }
  }
}

TEST_CASE("softmax_fast: NaN rows as the reference (NaN), one element gives 1", "[cpu]") {
  if (!have_avx2()) return;
  for (size_t at : {size_t{0}, size_t{5}, size_t{10}}) {
    std::vector<float> x(11, 0.5f);
    x[at] = std::nanf("");
    softmax_fast(x.data(), 11);
    for (float v : x) CHECK(std::isnan(v));
  }
  std::vector<float> inf_row(9, -std::numeric_limits<float>::infinity());
  softmax_fast(inf_row.data(), 9);  // no finite score: NaN, as softmax_inplace
  for (float v : inf_row) CHECK(std::isnan(v));
  float one = -3.0f;
  softmax_fast(&one, 1);
  CHECK(one == 1.0f);
}

TEST_CASE("softmax_fast: the max is found at every lane and in the tail (no overflow)", "[cpu]") {
  if (!have_avx2()) return;
  // One score 400 above the rest: with the right max its exp is exactly 1 and the others
  // underflow to 0; a max taken from the wrong element overflows exp to inf and gives NaN.
  for (int64_t n = 1; n <= 40; ++n)
    for (int64_t p = 0; p < n; ++p) {
      std::vector<float> x(static_cast<size_t>(n), -200.0f);
      x[static_cast<size_t>(p)] = 200.0f;
      softmax_fast(x.data(), n);
      CAPTURE(n, p);
      size_t bad = 0;
      for (int64_t i = 0; i < n; ++i)
        bad += x[static_cast<size_t>(i)] != (i == p ? 1.0f : 0.0f) ? 1u : 0u;
      CHECK(bad == 0);
    }
}
