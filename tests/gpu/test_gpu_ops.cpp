// Every op of the CUDA backend against the CPU reference backend (the oracle) over a grid of
// shapes (sizes off the warp and block sizes) and weight dtypes, with the tolerances below.
// Runs only where a GPU is visible; main() (test_gpu_backend_main.cpp) exits 77 elsewhere.
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "backend_pair.h"
#include "core/error.h"

using namespace llmctl;
using llmctl::test::fetch;
using llmctl::test::make_f32;
using llmctl::test::make_i32;
using llmctl::test::make_weight;
using llmctl::test::max_abs_diff;
using llmctl::test::random_floats;

namespace {

constexpr GgmlType kAllTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16,
                                  GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1,
                                  GgmlType::MXFP4};

// matmul tolerance per dtype, as a multiple of n * 2^-24 * sum_i |w_i x_i| (the classic bound
// on the error of an n-term f32 dot product; the two backends sum in different orders, so their
// difference is bounded by twice it). Dequantization is exact in f32 for every dtype (common.cuh
// "Exactness"), so both sides multiply the same numbers and every dtype gets the same factor:
//   F32 2, F16 2, BF16 2, Q8_0 2, Q4_0 2, Q4_1 2, MXFP4 2.
double matmul_tolerance_factor(GgmlType) { return 2.0; }

struct Fixture {
  cpu::CpuBackend cpu;
  cuda::CudaBackend gpu{0};
};

}  // namespace

TEST_CASE("cuda get_rows equals the CPU for every dtype", "[gpu]") {
  Fixture f;
  for (const GgmlType type : kAllTypes) {
    const bool blocks = ggml_traits(type).block_size == 32;
    for (const int64_t n_cols : blocks ? std::vector<int64_t>{32, 96, 800, 4128}
                                       : std::vector<int64_t>{1, 7, 33, 1000, 4097}) {
      for (const int64_t n_tokens : {1, 5, 67}) {
        CAPTURE(ggml_type_name(type), n_cols, n_tokens);
        const auto w = make_weight(f.gpu, type, 37, n_cols, static_cast<uint64_t>(n_cols));
        std::vector<int32_t> ids(static_cast<size_t>(n_tokens));
        for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 13 + 36) % 37);
        Buffer ci = make_i32(f.cpu, ids), gi = make_i32(f.gpu, ids);
        Buffer co = f.cpu.alloc(n_tokens * n_cols), go = f.gpu.alloc(n_tokens * n_cols);
        f.cpu.get_rows(w.host, ci, n_tokens, co);
        f.gpu.get_rows(w.gpu, gi, n_tokens, go);
        CHECK(max_abs_diff(fetch(f.gpu, go, n_tokens * n_cols),
                           fetch(f.cpu, co, n_tokens * n_cols)) ==
              0.0);  // exact: the same dequantization
      }
    }
  }
  const auto w = make_weight(f.gpu, GgmlType::Q4_0, 10, 64, 1);
  Buffer bad = make_i32(f.gpu, {0, 10});
  Buffer out = f.gpu.alloc(2 * 64);
  CHECK_THROWS_WITH(f.gpu.get_rows(w.gpu, bad, 2, out), Catch::Contains("id 10 is outside"));
}

TEST_CASE("cuda matmul equals the CPU within the f32 dot-product bound", "[gpu]") {
  Fixture f;
  struct Shape {
    int64_t n, d;
  };
  for (const GgmlType type : kAllTypes) {
    const bool blocks = ggml_traits(type).block_size == 32;
    std::vector<Shape> shapes{{32, 1}, {64, 33}, {256, 257}, {1024, 100}, {4096, 67}};
    if (!blocks) shapes.insert(shapes.end(), {{7, 5}, {100, 31}, {1000, 9}});
    for (const Shape s : shapes) {
      for (const int64_t n_tokens : {1, 3, 8, 9, 17}) {
        CAPTURE(ggml_type_name(type), s.n, s.d, n_tokens);
        const auto w = make_weight(f.gpu, type, s.d, s.n, static_cast<uint64_t>(s.n * 31 + s.d));
        const auto x = random_floats(static_cast<size_t>(n_tokens * s.n), 99);
        Buffer cx = make_f32(f.cpu, x), gx = make_f32(f.gpu, x);
        Buffer co = f.cpu.alloc(n_tokens * s.d), go = f.gpu.alloc(n_tokens * s.d);
        f.cpu.matmul(w.host, cx, n_tokens, co);
        f.gpu.matmul(w.gpu, gx, n_tokens, go);
        const auto got = fetch(f.gpu, go, n_tokens * s.d);
        const auto want = fetch(f.cpu, co, n_tokens * s.d);
        const double unit = static_cast<double>(s.n) * std::ldexp(1.0, -24);
        for (int64_t t = 0; t < n_tokens; ++t) {
          for (int64_t r = 0; r < s.d; ++r) {
            double mag = 0.0;  // sum |w x| of this output
            for (int64_t i = 0; i < s.n; ++i)
              mag += std::fabs(static_cast<double>(w.values[static_cast<size_t>(r * s.n + i)]) *
                               static_cast<double>(x[static_cast<size_t>(t * s.n + i)]));
            const auto k = static_cast<size_t>(t * s.d + r);
            const double diff =
                std::fabs(static_cast<double>(got[k]) - static_cast<double>(want[k]));
            const double tol = matmul_tolerance_factor(type) * unit * mag;
            if (!(diff <= tol))
              FAIL_CHECK("t " << t << " row " << r << ": |" << got[k] << " - " << want[k] << "| > "
                              << tol);
          }
        }
      }
    }
  }
}

TEST_CASE("cuda rmsnorm, add_bias, silu_mul, gelu_mul, softcap, scale, add, copy_rows equal the CPU",
          "[gpu]") {
  Fixture f;
  for (const int64_t n : llmctl::test::odd_lengths()) {
    for (const int64_t n_tokens : {1, 3, 17}) {
      CAPTURE(n, n_tokens);
      const int64_t total = n * n_tokens;
      const auto x = random_floats(static_cast<size_t>(total), static_cast<uint64_t>(total), -4, 4);
      const auto y = random_floats(static_cast<size_t>(total), 7, -8, 8);
      const auto wv = random_floats(static_cast<size_t>(n), 5);
      WeightView wh{"norm", GgmlType::F32, n, 1, wv.data()};
      const WeightView wg = f.gpu.bind_weight(wh);
      Buffer cx = make_f32(f.cpu, x), gx = make_f32(f.gpu, x);
      Buffer cy = make_f32(f.cpu, y), gy = make_f32(f.gpu, y);
      Buffer co = f.cpu.alloc(total), go = f.gpu.alloc(total);

      // rmsnorm: the scale may differ in its last bit (double sums in another order): 5e-7
      // relative to the output's magnitude.
      f.cpu.rmsnorm(cx, wh, 1e-5f, n_tokens, co);
      f.gpu.rmsnorm(gx, wg, 1e-5f, n_tokens, go);
      auto want = fetch(f.cpu, co, total), got = fetch(f.gpu, go, total);
      for (size_t i = 0; i < want.size(); ++i)
        CHECK(std::fabs(got[i] - want[i]) <= 5e-7f * std::fabs(want[i]));

      // silu_mul: expf vs glibc exp differ by an ulp or two: 1e-6 relative.
      f.cpu.silu_mul(cx, cy, total, co);
      f.gpu.silu_mul(gx, gy, total, go);
      want = fetch(f.cpu, co, total);
      got = fetch(f.gpu, go, total);
      for (size_t i = 0; i < want.size(); ++i)
        CHECK(std::fabs(got[i] - want[i]) <= 1e-6f * std::fabs(want[i]) + 1e-30f);

      // gelu_mul: tanhf vs glibc's tanhf, an ulp or two of 1 + tanh: 2e-6 relative, plus
      // 2^-22 |g u| where 1 + tanh cancels (g < -3).
      f.cpu.gelu_mul(cx, cy, total, co);
      f.gpu.gelu_mul(gx, gy, total, go);
      want = fetch(f.cpu, co, total);
      got = fetch(f.gpu, go, total);
      for (size_t i = 0; i < want.size(); ++i)
        CHECK(std::fabs(got[i] - want[i]) <=
              2e-6f * std::fabs(want[i]) + 2.4e-7f * std::fabs(x[i] * y[i]) + 1e-30f);

      // swiglu_oai: expf vs glibc's exp, an ulp or two: 2e-6 relative.
      f.cpu.swiglu_oai(cx, cy, total, co);
      f.gpu.swiglu_oai(gx, gy, total, go);
      want = fetch(f.cpu, co, total);
      got = fetch(f.gpu, go, total);
      for (size_t i = 0; i < want.size(); ++i)
        CHECK(std::fabs(got[i] - want[i]) <= 2e-6f * std::fabs(want[i]) + 1e-30f);

      // softcap (cap 3 over y in [-8, 8): the bend and the flat part): tanhf, 2e-6 relative.
      Buffer csc = make_f32(f.cpu, y), gsc = make_f32(f.gpu, y);
      f.cpu.softcap(csc, total, 3.0f);
      f.gpu.softcap(gsc, total, 3.0f);
      want = fetch(f.cpu, csc, total);
      got = fetch(f.gpu, gsc, total);
      for (size_t i = 0; i < want.size(); ++i)
        CHECK(std::fabs(got[i] - want[i]) <= 2e-6f * std::fabs(want[i]) + 1e-30f);

      // scale (Gemma's sqrt(640)), add_bias, add, copy_rows: one rounding or none: exact.
      Buffer csl = make_f32(f.cpu, y), gsl = make_f32(f.gpu, y);
      f.cpu.scale(csl, total, 25.298221f);
      f.gpu.scale(gsl, total, 25.298221f);
      CHECK(max_abs_diff(fetch(f.gpu, gsl, total), fetch(f.cpu, csl, total)) == 0.0);
      f.cpu.add_bias(cx, wh, n_tokens);
      f.gpu.add_bias(gx, wg, n_tokens);
      CHECK(max_abs_diff(fetch(f.gpu, gx, total), fetch(f.cpu, cx, total)) == 0.0);
      f.cpu.add(cx, cy, total);
      f.gpu.add(gx, gy, total);
      CHECK(max_abs_diff(fetch(f.gpu, gx, total), fetch(f.cpu, cx, total)) == 0.0);
      std::vector<int32_t> rows{static_cast<int32_t>(n_tokens - 1), 0,
                                static_cast<int32_t>(n_tokens / 2)};
      Buffer cr = make_i32(f.cpu, rows), gr = make_i32(f.gpu, rows);
      f.cpu.copy_rows(cx, n, cr, 3, co);
      f.gpu.copy_rows(gx, n, gr, 3, go);
      CHECK(max_abs_diff(fetch(f.gpu, go, 3 * n), fetch(f.cpu, co, 3 * n)) == 0.0);
    }
  }
}

TEST_CASE("cuda attn_temperature equals the CPU bit for bit", "[gpu]") {
  // One factor per row (the same double math, rounded once) and one f32 multiply: exact.
  Fixture f;
  const std::vector<int32_t> pos{0, 15, 16, 17, 31, 32, 47, 100, 16384, 3};
  const auto n_tokens = static_cast<int64_t>(pos.size());
  for (const int64_t n : {1, 31, 64, 1000}) {
    CAPTURE(n);
    const auto x =
        random_floats(static_cast<size_t>(n * n_tokens), static_cast<uint64_t>(n), -4, 4);
    Buffer cx = make_f32(f.cpu, x), gx = make_f32(f.gpu, x);
    Buffer cp = make_i32(f.cpu, pos), gp = make_i32(f.gpu, pos);
    f.cpu.attn_temperature(cx, cp, n_tokens, n, 0.1, 16);
    f.gpu.attn_temperature(gx, gp, n_tokens, n, 0.1, 16);
    CHECK(max_abs_diff(fetch(f.gpu, gx, n * n_tokens), fetch(f.cpu, cx, n * n_tokens)) == 0.0);
  }
}

TEST_CASE("cuda rope equals the CPU: normal and neox pairs, scaling, freq factors", "[gpu]") {
  Fixture f;
  struct Case {
    RopeType type;
    int64_t head_dim, n_rot;
    double scale;
    bool factors;
  };
  const Case cases[] = {
      {RopeType::Normal, 64, 64, 1.0, false},   {RopeType::Neox, 64, 64, 1.0, false},
      {RopeType::Normal, 100, 50, 0.25, false}, {RopeType::Neox, 96, 32, 0.5, true},
      {RopeType::Normal, 128, 128, 1.0, true},  {RopeType::Neox, 6, 2, 1.0, false}};
  const std::vector<int32_t> positions{0, 1, 7, 31, 1000, 131071, 5, 3};
  const auto n_tokens = static_cast<int64_t>(positions.size());
  for (const Case& c : cases) {
    for (const int64_t n_heads : {1, 3, 33}) {
      CAPTURE(static_cast<int>(c.type), c.head_dim, c.n_rot, c.scale, c.factors, n_heads);
      const int64_t total = n_tokens * n_heads * c.head_dim;
      const auto x = random_floats(static_cast<size_t>(total), static_cast<uint64_t>(total));
      const auto ff = random_floats(static_cast<size_t>(c.n_rot / 2), 3, 1.0f, 40.0f);
      RopeParams p;
      p.type = c.type;
      p.head_dim = c.head_dim;
      p.n_rot = c.n_rot;
      p.freq_base = 500000.0;
      p.freq_scale = c.scale;
      if (c.factors)
        p.freq_factors = WeightView{"rope_freqs", GgmlType::F32, c.n_rot / 2, 1, ff.data()};
      RopeParams pg = p;
      pg.freq_factors = f.gpu.bind_weight(p.freq_factors);
      Buffer cx = make_f32(f.cpu, x), gx = make_f32(f.gpu, x);
      Buffer cp = make_i32(f.cpu, positions), gp = make_i32(f.gpu, positions);
      f.cpu.rope(cx, cp, n_tokens, n_heads, p);
      f.gpu.rope(gx, gp, n_tokens, n_heads, pg);
      // cos/sin in double differ by an ulp or two between the device and glibc, which can move
      // their float roundings (and then the products' and sums') by an ulp each: 1e-6 absolute
      // on |x| <= 1 inputs. A wrong pairing or angle moves values by ~1e-1.
      CHECK(max_abs_diff(fetch(f.gpu, gx, total), fetch(f.cpu, cx, total)) <= 1e-6);
    }
  }
}

TEST_CASE("cuda ops report bad device-resident indices at the next sync", "[gpu]") {
  Fixture f;
  RopeParams p;
  p.head_dim = 4;
  p.n_rot = 4;
  Buffer x = f.gpu.alloc(8);
  Buffer pos = make_i32(f.gpu, {3, -2});
  f.gpu.rope(x, pos, 2, 1, p);
  CHECK_THROWS_WITH(f.gpu.sync(), Catch::Contains("negative position"));
  f.gpu.sync();  // the flag was cleared

  Buffer rows = make_i32(f.gpu, {0, 2});
  Buffer out = f.gpu.alloc(8);
  f.gpu.copy_rows(x, 4, rows, 2, out);
  CHECK_THROWS_WITH(fetch(f.gpu, out, 8), Catch::Contains("copy_rows"));

  Buffer k = f.gpu.alloc(4), v = f.gpu.alloc(4);
  Buffer kp = f.gpu.alloc(8), vp = f.gpu.alloc(8);
  Buffer slots = make_i32(f.gpu, {2});
  f.gpu.kv_store(k, v, slots, 1, 4, kp, vp);
  CHECK_THROWS_WITH(f.gpu.sync(), Catch::Contains("slot outside"));
}
