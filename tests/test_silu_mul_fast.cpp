// The fast backend's SwiGLU product (src/backend/cpu/silu_mul_fast.h) against
// g / (1 + exp(-g)) * u in double, over the whole float range of g, and its special values
// against the reference backend's formula.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "backend/cpu/attention_fast.h"
#include "backend/cpu/silu_mul_fast.h"

using namespace llmctl::cpu;

TEST_CASE("silu_mul_fast: within 8 float ulps of silu(g) * u, any length", "[cpu]") {
  if (!attention_fast_available()) {
    WARN("no AVX2+FMA+F16C on this CPU: the fast SiLU is not used here, nothing to test");
    return;
  }
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 6.0f);
  for (int64_t n : {1, 7, 8, 9, 100, 4097}) {
    std::vector<float> g(static_cast<size_t>(n)), u(static_cast<size_t>(n)), o(g.size());
    for (size_t i = 0; i < g.size(); ++i) {
      g[i] = i % 50 == 3 ? -dist(rng) * 20.0f : dist(rng);  // some far in both tails
      u[i] = dist(rng);
    }
    silu_mul_fast(g.data(), u.data(), n, o.data());
    for (size_t i = 0; i < g.size(); ++i) {
      const double gd = g[i];
      const double exact = gd / (1.0 + std::exp(-gd)) * double{u[i]};
      INFO("n " << n << " g " << g[i] << " u " << u[i] << " got " << o[i] << " exact " << exact);
      // below g = -87 exp(-|g|) is flushed to 0 (exp_avx2.h), as the float reference's
      // exp(-g) = inf flushes g / (1 + inf): an absolute error up to |g u| 2^-125
      const double flush = std::fabs(gd * double{u[i]}) * std::ldexp(1.0, -125);
      CHECK(std::fabs(double{o[i]} - exact) <= 8.0 * std::ldexp(std::fabs(exact), -24) + flush);
    }
  }
}

TEST_CASE("silu_mul_fast: special values as the reference formula", "[cpu]") {
  if (!attention_fast_available()) return;
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> g = {0.0f, -0.0f,         200.0f, -200.0f, inf,
                                -inf, std::nanf(""), 1.0f,   -1.0f};
  const std::vector<float> u(g.size(), 2.0f);
  std::vector<float> o(g.size());
  silu_mul_fast(g.data(), u.data(), static_cast<int64_t>(g.size()), o.data());
  for (size_t i = 0; i < g.size(); ++i) {
    const float ref = g[i] / (1.0f + std::exp(-g[i])) * u[i];  // CpuBackend::silu_mul_range
    INFO("g " << g[i] << " got " << o[i] << " reference " << ref);
    if (std::isnan(ref)) {
      CHECK(std::isnan(o[i]));
    } else if (std::isinf(ref)) {
      CHECK(o[i] == ref);
    } else {
      CHECK(std::fabs(double{o[i]} - double{ref}) <= 8.0 * std::ldexp(std::fabs(double{ref}), -24));
      CHECK(std::signbit(o[i]) == std::signbit(ref));
    }
  }
  std::vector<float> alias = g;  // out may alias gate
  silu_mul_fast(alias.data(), u.data(), static_cast<int64_t>(g.size()), alias.data());
  for (size_t i = 0; i < g.size(); ++i)
    CHECK((std::isnan(o[i]) ? std::isnan(alias[i]) : alias[i] == o[i]));
}
