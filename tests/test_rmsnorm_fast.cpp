// The fast backend's RMSNorm (src/backend/cpu/rmsnorm_fast.h) against a float64 reading of its
// definition: within 2 float ulps of x * scale * w for rows of any length (8-lane body and
// tail), tiny and huge values, a zero row; a row's bits do not depend on its neighbours.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/rmsnorm_fast.h"
#include "core/cpu_features.h"
#include "support/random_data.h"

using namespace llmctl;

namespace {
bool has_avx2() {
  const CpuFeatures& f = cpu_features();
  return f.avx2 && f.fma;
}
}  // namespace

TEST_CASE("rmsnorm_fast: within 2 float ulps of the float64 definition, any length", "[cpu]") {
  if (!has_avx2()) {
    WARN("skipped: no AVX2+FMA on this CPU");
    return;
  }
  std::mt19937 rng(3);
  for (const int64_t n : {1, 7, 8, 9, 64, 100, 640, 2051}) {
    for (float magnitude : {1e-20f, 1.0f, 3e3f, 1e18f}) {
      std::vector<float> x = test::random_floats(rng, static_cast<size_t>(n), magnitude);
      const std::vector<float> w = test::random_floats(rng, static_cast<size_t>(n), 1.5f);
      std::vector<float> out(static_cast<size_t>(n));
      const float eps = 1e-6f;
      cpu::rmsnorm_fast(x.data(), w.data(), n, eps, out.data());
      double ss = 0.0;
      for (float v : x) ss += double{v} * double{v};
      const double scale = 1.0 / std::sqrt(ss / static_cast<double>(n) + double{eps});
      for (size_t i = 0; i < x.size(); ++i) {
        const double want = double{x[i]} * scale * double{w[i]};
        INFO("n " << n << " magnitude " << magnitude << " i " << i);
        CHECK(std::fabs(double{out[i]} - want) <= 2.5 * std::ldexp(std::fabs(want), -24) + 1e-40);
      }
      // in place gives the same bits
      std::vector<float> alias = x;
      cpu::rmsnorm_fast(alias.data(), w.data(), n, eps, alias.data());
      CHECK(std::memcmp(alias.data(), out.data(), out.size() * 4) == 0);
    }
  }
  std::vector<float> zero(40, 0.0f), w(40, 1.0f), out(40, -1.0f);
  cpu::rmsnorm_fast(zero.data(), w.data(), 40, 1e-5f, out.data());
  for (float v : out) CHECK(v == 0.0f);
}
