// The GeGLU product and the soft-cap (backend.h gelu_mul, softcap): the reference backend's
// f32 formulas (core/activation_math.h) and the fast backend's 8-lane versions
// (gelu_mul_fast.h, softcap_fast.h) against the definitions evaluated in double, special values,
// the seam's checks, and batch/thread invariance of the fast backend.
//
// Tolerances (e = 2^-24, one half-ulp of 1):
//   gelu_mul: |got - exact| <= e (8 |exact| + 4 |g u|). The relative part covers the roundings
//     of the products and of tanh; the absolute part the f32 reference's 1 + tanh(y), which near
//     y = -inf keeps only the absolute precision of tanh (~e), times 0.5 |g u|.
//   softcap: |got - exact| <= 8 e |exact| (tanh's relative condition number is <= 1, so the
//     division, tanh and product roundings stay relative).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "backend/cpu/attention_fast.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_fast_backend.h"
#include "backend/cpu/gelu_mul_fast.h"
#include "backend/cpu/softcap_fast.h"
#include "core/error.h"
#include "support/backend_buffers.h"

using namespace llmctl;
using llmctl::test::make;

namespace {

constexpr double kE = 1.0 / 16777216.0;  // 2^-24

double gelu_exact(double g) {
  return 0.5 * g * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g)));
}

bool gelu_close(float got, double g, double u) {
  const double exact = gelu_exact(g) * u;
  return std::fabs(double{got} - exact) <= kE * (8.0 * std::fabs(exact) + 4.0 * std::fabs(g * u));
}

bool softcap_close(float got, double x, double cap) {
  const double exact = cap * std::tanh(x / cap);
  return std::fabs(double{got} - exact) <= 8.0 * kE * std::fabs(exact);
}

// Gates over the whole useful range and both tails, ups of both signs.
void inputs(size_t n, std::vector<float>& g, std::vector<float>& u, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 3.0f);
  g.resize(n);
  u.resize(n);
  for (size_t i = 0; i < n; ++i) {
    g[i] = i % 37 == 5 ? d(rng) * 10.0f : (i % 41 == 7 ? d(rng) * 1e-3f : d(rng));
    u[i] = d(rng);
  }
}

std::vector<float> read(Backend& b, const Buffer& buf, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  b.download(buf, v.data(), n);
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("gelu_mul: reference and fast within the stated bound of the double formula", "[cpu]") {
  cpu::CpuBackend ref;
  cpu::CpuFastBackend fast(2);
  for (const int64_t n : {1, 7, 8, 9, 1000, 4099}) {
    std::vector<float> g, u;
    inputs(static_cast<size_t>(n), g, u, static_cast<uint32_t>(n));
    for (Backend* be : {static_cast<Backend*>(&ref), static_cast<Backend*>(&fast)}) {
      Buffer gb = make(*be, g), ub = make(*be, u), ob = be->alloc(n);
      be->gelu_mul(gb, ub, n, ob);
      const std::vector<float> o = read(*be, ob, n);
      int64_t bad = 0;
      for (size_t i = 0; i < g.size(); ++i) {
        if (gelu_close(o[i], g[i], u[i])) continue;
        if (++bad <= 5)
          WARN((be == &ref ? "reference" : "fast") << " g " << g[i] << " u " << u[i] << " got "
                                                   << o[i] << " exact " << gelu_exact(g[i]) * double{u[i]});
      }
      CHECK(bad == 0);
    }
  }
  // A few known values: gelu(1) = 0.841192, gelu(-1) = -0.158808 (tanh approximation).
  CHECK(gelu_exact(1.0) == Approx(0.8411919906).epsilon(1e-9));
  CHECK(gelu_exact(-1.0) == Approx(-0.1588080094).epsilon(1e-9));
}

TEST_CASE("gelu_mul: special values and aliasing as the reference formula", "[cpu]") {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> g = {0.0f, -0.0f, 10.0f, -10.0f,        100.0f, -100.0f,
                                inf,  -inf,  1e20f, std::nanf(""), 1e-30f, -3.0f};
  const std::vector<float> u(g.size(), 2.0f);
  std::vector<float> ref(g.size());
  cpu::CpuBackend rb;
  Buffer gb = make(rb, g), ub = make(rb, u), ob = rb.alloc(static_cast<int64_t>(g.size()));
  rb.gelu_mul(gb, ub, static_cast<int64_t>(g.size()), ob);
  ref = read(rb, ob, static_cast<int64_t>(g.size()));
  CHECK(std::isnan(ref[7]));  // -inf: -inf * (1 + tanh(-inf)) = -inf * 0
  CHECK(ref[6] == inf);
  if (!cpu::attention_fast_available()) return;
  std::vector<float> o(g.size());
  cpu::gelu_mul_fast(g.data(), u.data(), static_cast<int64_t>(g.size()), o.data());
  for (size_t i = 0; i < g.size(); ++i) {
    INFO("g " << g[i] << " fast " << o[i] << " reference " << ref[i]);
    if (std::isnan(ref[i])) {
      CHECK(std::isnan(o[i]));
    } else if (std::isinf(ref[i])) {
      CHECK(o[i] == ref[i]);
    } else {
      CHECK(gelu_close(o[i], g[i], u[i]));
      CHECK(std::signbit(o[i]) == std::signbit(ref[i]));
    }
  }
  std::vector<float> alias = g;  // out may alias gate
  cpu::gelu_mul_fast(alias.data(), u.data(), static_cast<int64_t>(g.size()), alias.data());
  CHECK(same_bits(alias, o));
}

TEST_CASE("softcap: reference and fast within 8 ulps of cap tanh(x / cap)", "[cpu]") {
  cpu::CpuBackend ref;
  cpu::CpuFastBackend fast(2);
  std::mt19937 rng(5);
  for (const float cap : {1.0f, 30.0f, 50.0f}) {
    for (const int64_t n : {1, 7, 9, 1000, 4101}) {
      std::normal_distribution<float> d(0.0f, cap);
      std::vector<float> x(static_cast<size_t>(n));
      for (size_t i = 0; i < x.size(); ++i)
        x[i] = i % 13 == 1 ? d(rng) * 1e-4f : (i % 17 == 2 ? d(rng) * 30.0f : d(rng));
      for (Backend* be : {static_cast<Backend*>(&ref), static_cast<Backend*>(&fast)}) {
        Buffer xb = make(*be, x);
        be->softcap(xb, n, cap);
        const std::vector<float> o = read(*be, xb, n);
        int64_t bad = 0;
        for (size_t i = 0; i < x.size(); ++i) {
          if (softcap_close(o[i], x[i], cap)) continue;
          if (++bad <= 5)
            WARN((be == &ref ? "reference" : "fast")
                 << " cap " << cap << " x " << x[i] << " got " << o[i]);
        }
        CHECK(bad == 0);
        for (const float v : o) CHECK(std::fabs(v) <= cap);
      }
    }
  }
}

TEST_CASE("softcap: special values, and the seam refuses a cap that is not finite and > 0",
          "[cpu]") {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {0.0f, -0.0f, inf, -inf, std::nanf(""), 0.625f * 30.0f, 1e30f};
  cpu::CpuBackend ref;
  cpu::CpuFastBackend fast(1);
  for (Backend* be : {static_cast<Backend*>(&ref), static_cast<Backend*>(&fast)}) {
    Buffer xb = make(*be, x);
    be->softcap(xb, static_cast<int64_t>(x.size()), 30.0f);
    const std::vector<float> o = read(*be, xb, static_cast<int64_t>(x.size()));
    CHECK((o[0] == 0.0f && !std::signbit(o[0])));
    CHECK((o[1] == 0.0f && std::signbit(o[1])));
    CHECK(o[2] == 30.0f);
    CHECK(o[3] == -30.0f);
    CHECK(std::isnan(o[4]));
    CHECK(softcap_close(o[5], x[5], 30.0));  // the polynomial / exp switch point
    CHECK(o[6] == 30.0f);
  }
  Buffer xb = make(ref, x);
  for (const float cap : {0.0f, -1.0f, inf, std::nanf("")})
    CHECK_THROWS_WITH(ref.softcap(xb, 1, cap), Catch::Contains("expected a finite value > 0"));
  CHECK_THROWS_WITH(ref.softcap(xb, 8, 1.0f), Catch::Contains("expected at least 8"));
  Buffer small = ref.alloc(3);
  CHECK_THROWS_WITH(ref.gelu_mul(xb, small, 4, xb), Catch::Contains("up has 3 elements"));
}

TEST_CASE("gelu_mul, softcap: the fast backend gives each element the bits it gets alone",
          "[cpu]") {
  // 40000 elements: above the threshold where the fast backend splits element-wise ops over its
  // threads, so 1 and 2 threads cut the array differently; each slice alone must match too.
  const int64_t n = 40000;
  std::vector<float> g, u;
  inputs(static_cast<size_t>(n), g, u, 17);
  cpu::CpuFastBackend one(1), two(2);
  std::vector<float> got[2][2];
  int k = 0;
  for (cpu::CpuFastBackend* be : {&one, &two}) {
    Buffer gb = make(*be, g), ub = make(*be, u), ob = be->alloc(n);
    be->gelu_mul(gb, ub, n, ob);
    got[k][0] = read(*be, ob, n);
    be->softcap(gb, n, 5.0f);
    got[k][1] = read(*be, gb, n);
    ++k;
  }
  CHECK(same_bits(got[0][0], got[1][0]));
  CHECK(same_bits(got[0][1], got[1][1]));
  for (const int64_t at : {int64_t{3}, int64_t{4095}, int64_t{39991}}) {
    const int64_t len = std::min<int64_t>(5, n - at);
    std::vector<float> gs(g.begin() + at, g.begin() + at + len),
        us(u.begin() + at, u.begin() + at + len);
    Buffer gb = make(one, gs), ub = make(one, us), ob = one.alloc(len);
    one.gelu_mul(gb, ub, len, ob);
    CHECK(same_bits(read(one, ob, len),
                    std::vector<float>(got[0][0].begin() + at, got[0][0].begin() + at + len)));
    one.softcap(gb, len, 5.0f);
    CHECK(same_bits(read(one, gb, len),
                    std::vector<float>(got[0][1].begin() + at, got[0][1].begin() + at + len)));
  }
}

TEST_CASE("scale: one f32 multiply per element on both CPU backends; the seam refuses a factor "
          "that is not finite",
          "[cpu]") {
  const float factor = static_cast<float>(std::sqrt(640.0));  // Gemma 3 270M's embedding scale
  std::vector<float> g, u;
  inputs(4101, g, u, 23);
  g.push_back(-0.0f);
  cpu::CpuBackend ref;
  cpu::CpuFastBackend fast(2);
  const auto n = static_cast<int64_t>(g.size());
  for (Backend* be : {static_cast<Backend*>(&ref), static_cast<Backend*>(&fast)}) {
    Buffer xb = make(*be, g);
    be->scale(xb, n, factor);
    const std::vector<float> o = read(*be, xb, n);
    int64_t bad = 0;
    for (size_t i = 0; i < g.size(); ++i) bad += o[i] != g[i] * factor;
    CHECK(bad == 0);
    CHECK(std::signbit(o.back()));
    CHECK_THROWS_WITH(be->scale(xb, 1, std::numeric_limits<float>::infinity()),
                      Catch::Contains("expected a finite value"));
    CHECK_THROWS_WITH(be->scale(xb, n + 1, 2.0f), Catch::Contains("expected at least"));
  }
}
