// The CPU matmul fast path (src/backend/cpu/matmul_fast.h; its thread pool: test_thread_pool):
//   * every dtype against a double-precision reference built from dequantize_row, with a
//     tolerance derived per dtype (see tolerance() below);
//   * the int8 activation path, and the f16 activations of F16 weights, against the test's own
//     reading of the documented rounding (tight: float rounding only);
//   * batch and thread invariance, bitwise: a token alone, in a batch, at another position,
//     on 1, 2 or 3 threads gives the same bits (the instruction sets against each other:
//     test_cpu_matmul_isa.cpp).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/matmul_fast.h"
#include "backend/cpu/quantize_activations.h"
#include "backend/cpu/thread_pool.h"
#include "backend/cpu/weight_repack.h"
#include "core/error.h"
#include "core/fp16.h"
#include "quant/dequant.h"
#include "quant/quantize.h"
#include "support/matmul_cases.h"

using namespace llmctl;
using namespace llmctl::cpu;
using namespace llmctl::test;

namespace {

// Elements per activation scale, as matmul_kernels.h documents it: 256 for the K-quants and
// IQ4_XS (one scale per super-block, their sub-block scales being integers), 32 for every
// other type.
int64_t activation_group(GgmlType type) {
  switch (type) {
    case GgmlType::IQ4_XS:
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
      return 256;
    default:
      return 32;
  }
}

// The test's reading of quantize_activations.h: per group, d = amax / 127,
// q = round_half_even(x * 127 / amax). Returns x with each value replaced by d * q (what the
// int8 kernels multiply with).
std::vector<double> quantized_x(const float* x, int64_t n, int64_t group = 32) {
  std::vector<double> xq(static_cast<size_t>(n));
  for (int64_t b = 0; b < n; b += group) {
    float amax = 0.0f;
    for (int64_t j = b; j < b + group; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f, id = amax == 0.0f ? 0.0f : 127.0f / amax;
    for (int64_t j = b; j < b + group; ++j)
      xq[static_cast<size_t>(j)] = static_cast<double>(d) * double{std::nearbyint(x[j] * id)};
  }
  return xq;
}

// x rounded to f16 (round to nearest even), as the F16-weight kernels multiply it.
std::vector<double> half_x(const float* x, int64_t n) {
  std::vector<double> xh(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) xh[static_cast<size_t>(j)] = fp16_to_f32(f32_to_fp16(x[j]));
  return xh;
}

// Tolerance for one output element, u = 2^-24 (float unit roundoff):
//  * Float rounding. Each of the 8 lanes is a chain of fma over n/8 terms (float kernels) or
//    one fma per 32-block (two for Q4_1: the q * d part, then the min part; the K-quants:
//    one or two per 256-block, over exact integer sums),
//    then 3 adds; the standard bound for recursive summation is (chain length) * u *
//    sum|terms|. A quantized term also rounds its factor (d_w * d_x; the min part's xsum * d_x)
//    once, and the two parts can cancel, so both are bounded by their absolute sums:
//    float_tol = (m + 5) * u * P, m = n / 8 (float) or n / 16 (quantized),
//    P = sum_j (|w_j| + 2 |m_w|) * (|x_j| + amax_b / 254)  (|d_w q_j| <= |w_j| + |m_w|, m_w
//    the block's min: Q4_1 m, K-quants dmin * m_j; |d_x q_x| <= |x_j| + amax_b / 254).
//    A K-quant super-block's integer sum (< 2^28) rounds once in its conversion to float: u
//    times its terms, inside P; the reference's decoded w_j rounds once (d*sc*q is exact, then -
//    dmin*m or * (q - 32)), at most u |w_j| per element, inside the + 5.
//  * Activation quantization (quantized kernels only, against the f32 x): round-to-nearest
//    leaves |x_j - d_x q_j| <= d_x / 2 = amax_b / 254 (times 1 + a few u for the rounding of
//    d and x * id), so act_tol = sum_j |w_j| * amax_b / 254 * (1 + 1e-5), amax_b over x_j's
//    group (activation_group).
//  * f16 activations (F16 weights, against the f32 x): |x_j - fp16(x_j)| <= 2^-11 |x_j| for
//    normal halves, <= 2^-25 below them, so act_tol = sum_j |w_j| (2^-11 |x_j| + 2^-25).
double tolerance(GgmlType type, const std::vector<float>& w, float m_w_max, const float* x,
                 int64_t n, bool with_activation_error) {
  const double u = std::ldexp(1.0, -24);
  const bool q = is_quantized(type);
  if (is_half(type)) {
    double p = 0.0, act = 0.0;
    for (int64_t j = 0; j < n; ++j) {
      const double wj = std::fabs(double{w[static_cast<size_t>(j)]}), xj = std::fabs(x[j]);
      p += wj * (xj * (1.0 + std::ldexp(1.0, -11)) + std::ldexp(1.0, -25));
      act += wj * (std::ldexp(1.0, -11) * xj + std::ldexp(1.0, -25));
    }
    return (static_cast<double>(n) / 8.0 + 5.0) * u * p + (with_activation_error ? act : 0.0) +
           1e-30;
  }
  double p = 0.0, act = 0.0;
  const int64_t group = q ? activation_group(type) : n;
  for (int64_t b = 0; b < n; b += group) {
    const int64_t e = b + group;
    double amax = 0.0;
    for (int64_t j = b; j < e && q; ++j) amax = std::max(amax, std::fabs(double{x[j]}));
    for (int64_t j = b; j < e; ++j) {
      const double wj = std::fabs(double{w[static_cast<size_t>(j)]});
      p += (wj + 2.0 * double{m_w_max}) * (std::fabs(double{x[j]}) + amax / 254.0);
      act += wj * amax / 254.0;
    }
  }
  const double m = q ? static_cast<double>(n) / 16.0 : static_cast<double>(n) / 8.0;
  return (m + 5.0) * u * p + (with_activation_error ? act * (1.0 + 1e-5) : 0.0) + 1e-30;
}

// |m_w| of a Q4_1, Q5_1, Q2_K, Q4_K or Q5_K row (0 for other types): the largest block min
// (Q4_1, Q5_1: m; K-quants: dmin * m_j of each sub-block).
float max_min(const Weight& w, int64_t r) {
  float m = 0.0f;
  const uint8_t* row = w.bytes.data() + static_cast<size_t>(r) * w.row_bytes();
  if (has_min(w.type)) {
    for (int64_t b = 0; b < w.n / 32; ++b)
      m = std::max(m, std::fabs(fp16_to_f32(
                          load_u16_le(row + ggml_traits(w.type).type_size * b + 2))));
  } else if (w.type == GgmlType::Q2_K) {  // bytes 0..15: m in the high nibbles; dmin at 82
    for (int64_t s = 0; s < w.n / 256; ++s) {
      const uint8_t* sb = row + 84 * static_cast<size_t>(s);
      for (int j = 0; j < 16; ++j)
        m = std::max(m, std::fabs(fp16_to_f32(load_u16_le(sb + 82)) * static_cast<float>(sb[j] >> 4)));
    }
  } else if (w.type == GgmlType::Q4_K || w.type == GgmlType::Q5_K) {
    const size_t bytes = ggml_traits(w.type).type_size;
    for (int64_t s = 0; s < w.n / 256; ++s) {
      const uint8_t* sb = row + bytes * static_cast<size_t>(s);
      for (int j = 0; j < 8; ++j) {
        int sc = 0, mj = 0;
        k_scale_min(sb + 4, j, &sc, &mj);
        m = std::max(m, std::fabs(fp16_to_f32(load_u16_le(sb + 2)) * static_cast<float>(mj)));
      }
    }
  }
  return m;
}

void check_against_reference(const Weight& w, const std::vector<float>& x, int64_t n_tokens,
                             const std::vector<float>& out) {
  for (int64_t r = 0; r < w.d; ++r) {
    const std::vector<float> wr = w.row(r);
    for (int64_t t = 0; t < n_tokens; ++t) {
      const float* xt = x.data() + t * w.n;
      const bool q = is_quantized(w.type) || is_half(w.type);
      const std::vector<double> xq = is_quantized(w.type)
                                         ? quantized_x(xt, w.n, activation_group(w.type))
                                     : is_half(w.type) ? half_x(xt, w.n)
                                                       : std::vector<double>(xt, xt + w.n);
      double exact = 0.0, exact_q = 0.0;
      for (int64_t j = 0; j < w.n; ++j) {
        exact += double{wr[static_cast<size_t>(j)]} * double{xt[j]};
        exact_q += double{wr[static_cast<size_t>(j)]} * xq[static_cast<size_t>(j)];
      }
      const double got = out[static_cast<size_t>(t * w.d + r)];
      INFO(ggml_type_name(w.type) << " d=" << w.d << " n=" << w.n << " row " << r << " token " << t
                                  << " got " << got << " exact " << exact);
      CHECK(std::fabs(got - exact) <= tolerance(w.type, wr, max_min(w, r), xt, w.n, q));
      // Against the int8 (or f16) activations: float rounding only.
      if (q)
        CHECK(std::fabs(got - exact_q) <= tolerance(w.type, wr, max_min(w, r), xt, w.n, false));
    }
  }
}

}  // namespace

TEST_CASE("activation quantization: scalar and AVX2 follow the documented rule", "[cpu]") {
  std::mt19937 rng(7);
  const int64_t n = 256;
  std::vector<float> x = make_x(1, n, rng);
  // block 2 with amax 127 (id = 1): ties go to even
  x[64] = 127.0f;
  x[65] = 2.5f;
  x[66] = -2.5f;
  x[67] = 3.5f;
  for (int64_t j = 68; j < 96; ++j) x[static_cast<size_t>(j)] = 1.0f;
  x[200] = -300.0f;  // the largest magnitude of the 256: every scale of group 256 is its
  std::vector<int8_t> qs(n);
  std::vector<float> d(n / 32);
  for (int group : {32, 256}) {
    for (MatmulIsa isa : isas()) {
      INFO("group " << group << " isa " << static_cast<int>(isa));
      if (isa != MatmulIsa::Scalar)
        quantize_activations_avx2(x.data(), n, qs.data(), d.data(), group);
      else
        quantize_activations_scalar(x.data(), n, qs.data(), d.data(), group);
      if (group == 32) {
        CHECK(qs[65] == 2);
        CHECK(qs[66] == -2);
        CHECK(qs[67] == 4);
      } else {
        CHECK(qs[200] == -127);
        CHECK(qs[64] == 54);  // 127 * 127 / 300 = 53.76
        for (float db : d) CHECK(db == 300.0f / 127.0f);
      }
      const std::vector<double> xq = quantized_x(x.data(), n, group);
      for (int64_t j = 0; j < n; ++j)
        CHECK(double{d[static_cast<size_t>(j / 32)]} * qs[static_cast<size_t>(j)] ==
              xq[static_cast<size_t>(j)]);
    }
  }
}

TEST_CASE("activation sums: AVX2 gives the scalar block and half sums", "[cpu]") {
  if (!matmul_fast_has_avx2()) {
    WARN("skipped: no AVX2+FMA+F16C on this CPU");
    return;
  }
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> byte(-128, 127);
  const int64_t n = 512;
  std::vector<int8_t> qs(n);
  for (int8_t& v : qs) v = static_cast<int8_t>(byte(rng));
  for (int64_t j = 0; j < 32; ++j) qs[static_cast<size_t>(j)] = -128;   // block 0: all -128
  for (int64_t j = 32; j < 48; ++j) qs[static_cast<size_t>(j)] = 127;   // block 1: halves
  for (int64_t j = 48; j < 64; ++j) qs[static_cast<size_t>(j)] = -127;  // 2032 and -2032
  std::vector<int32_t> sums(n / 32), halves(n / 32), want_sums(n / 32), want_halves(n / 32);
  activation_block_sums(qs.data(), n, want_sums.data());
  activation_half_sums(qs.data(), n, want_halves.data());
  CHECK(want_sums[0] == -4096);
  CHECK(want_halves[1] == static_cast<int32_t>(2032u | (static_cast<uint32_t>(-2032) << 16)));
  activation_sums_avx2(qs.data(), n, sums.data(), halves.data());
  CHECK(sums == want_sums);
  CHECK(halves == want_halves);
  std::vector<int32_t> only(n / 32);
  activation_sums_avx2(qs.data(), n, only.data(), nullptr);
  CHECK(only == want_sums);
}

TEST_CASE("f16 activations: scalar and AVX2 round to nearest even and flag overflow", "[cpu]") {
  std::mt19937 rng(17);
  for (int64_t n : {0, 1, 7, 8, 9, 100}) {
    std::vector<float> x = make_x(1, n, rng);
    // ties at 1 + 2^-11 (to 1) and 1 + 3 * 2^-11 (to 1 + 2^-9), a subnormal half, the limit
    const float special[] = {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 3e-6f, -65519.99f, 1e-30f};
    for (int64_t j = 0; j < n && j < 5; ++j) x[static_cast<size_t>(j)] = special[j];
    for (float bad : {65520.0f, -1e6f, INFINITY, NAN}) {
      for (MatmulIsa isa : isas()) {
        INFO("n " << n << " isa " << static_cast<int>(isa) << " bad " << bad);
        std::vector<uint16_t> xh(static_cast<size_t>(n), 0xffff);
        auto convert = [&](const std::vector<float>& v) {
          return isa != MatmulIsa::Scalar ? activations_to_f16_avx2(v.data(), n, xh.data())
                                        : activations_to_f16_scalar(v.data(), n, xh.data());
        };
        CHECK(convert(x));
        for (int64_t j = 0; j < n; ++j)
          CHECK(xh[static_cast<size_t>(j)] == f32_to_fp16(x[static_cast<size_t>(j)]));
        if (n >= 2) CHECK(xh[0] == 0x3c00);
        if (n >= 2) CHECK(fp16_to_f32(xh[1]) == 1.0f + 0x1p-9f);
        // widened back to f32 (halves_widened kernels): the f16 values, or x itself on overflow
        std::vector<float> xr(static_cast<size_t>(n), -1.0f);
        auto round = [&](const std::vector<float>& v) {
          return isa != MatmulIsa::Scalar ? activations_round_f16_avx2(v.data(), n, xr.data())
                                        : activations_round_f16_scalar(v.data(), n, xr.data());
        };
        CHECK(round(x));
        for (int64_t j = 0; j < n; ++j)
          CHECK(xr[static_cast<size_t>(j)] == fp16_to_f32(xh[static_cast<size_t>(j)]));
        for (int64_t at : {int64_t{0}, n - 1}) {  // one bad value, in the vector part or the tail
          if (n == 0) continue;
          std::vector<float> y = x;
          y[static_cast<size_t>(at)] = bad;
          CHECK_FALSE(convert(y));
          CHECK_FALSE(round(y));
          CHECK(std::memcmp(xr.data(), y.data(), static_cast<size_t>(n) * sizeof(float)) == 0);
        }
      }
    }
  }
}

TEST_CASE("matmul_fast: F16 tokens that overflow f16 keep f32 activations, batch-invariant",
          "[cpu]") {
  std::mt19937 rng(23);
  for (int64_t n : {13, 100, 1059}) {
    const int64_t d = 7, n_tokens = 9;
    const Weight w = make_weight(GgmlType::F16, d, n, rng);
    std::vector<float> x = make_x(n_tokens, n, rng);
    x[static_cast<size_t>(2 * n + n / 2)] = 1.0e5f;   // token 2: a value past f16's range
    x[static_cast<size_t>(5 * n + n - 1)] = -7.0e4f;  // token 5: in the last (tail) element
    for (MatmulIsa isa : isas()) {
      INFO("n " << n << " isa " << static_cast<int>(isa));
      const std::vector<float> batch = run(isa, w, x, n_tokens, 2);
      for (int64_t t = 0; t < n_tokens; ++t) {
        const std::vector<float> one(x.begin() + t * n, x.begin() + (t + 1) * n);
        const std::vector<float> alone = run(isa, w, one, 1, 1);
        CHECK(same_bits(alone.data(), batch.data() + t * d, d));
        if (t != 2 && t != 5) continue;
        // f32 activations: the float bound alone, which the f16 rounding (or inf) would break
        for (int64_t r = 0; r < d; ++r) {
          const std::vector<float> wr = w.row(r);
          double exact = 0.0;
          for (int64_t j = 0; j < n; ++j)
            exact += double{wr[static_cast<size_t>(j)]} * double{one[static_cast<size_t>(j)]};
          const double got = batch[static_cast<size_t>(t * d + r)];
          CHECK(std::fabs(got - exact) <= tolerance(GgmlType::F32, wr, 0.0f, one.data(), n, false));
        }
      }
    }
  }
}

TEST_CASE("matmul_fast: every dtype against a double-precision reference", "[cpu]") {
  std::mt19937 rng(1234);
  for (GgmlType type : kTypes) {
    for (int ni = 0; ni < 4; ++ni) {
      const int64_t n = n_for(type, ni);
      for (int64_t d : {1, 5, 13, 37}) {
        const Weight w = make_weight(type, d, n, rng);
        for (int64_t n_tokens : {1, 2, 3, 5, 8, 17, 64}) {
          if (n > 300 && n_tokens > 8) continue;  // keep the scalar reference runs short
          const std::vector<float> x = make_x(n_tokens, n, rng);
          for (MatmulIsa isa : isas())
            for (int n_threads : {1, 2, 3})
              check_against_reference(w, x, n_tokens, run(isa, w, x, n_tokens, n_threads));
        }
      }
    }
  }
}

TEST_CASE("matmul_fast: batch and thread invariance, bit for bit", "[cpu]") {
  std::mt19937 rng(99);
  for (GgmlType type : kTypes) {
    for (int ni = 0; ni < 4; ++ni) {
      const int64_t n = n_for(type, ni), d = 37, n_tokens = 17;
      const Weight w = make_weight(type, d, n, rng);
      const std::vector<float> x = make_x(n_tokens + 1, n, rng);  // token n_tokens: a filler
      for (MatmulIsa isa : isas()) {
        INFO(ggml_type_name(type) << " n=" << n << " isa " << static_cast<int>(isa));
        const std::vector<float> batch = run(isa, w, x, n_tokens, 1);
        for (int n_threads : {1, 2, 3}) {
          // the same batch on more threads
          CHECK(same_bits(run(isa, w, x, n_tokens, n_threads).data(), batch.data(), d * n_tokens));
          // each token alone
          for (int64_t t = 0; t < n_tokens; ++t) {
            const std::vector<float> one(x.begin() + t * n, x.begin() + (t + 1) * n);
            CHECK(same_bits(run(isa, w, one, 1, n_threads).data(), batch.data() + t * d, d));
          }
          // shifted by one position (filler first): token t now sits at t + 1
          std::vector<float> shifted(x.end() - n, x.end());
          shifted.insert(shifted.end(), x.begin(), x.end() - n);
          const std::vector<float> s = run(isa, w, shifted, n_tokens + 1, n_threads);
          CHECK(same_bits(s.data() + d, batch.data(), d * n_tokens));
        }
      }
    }
  }
}

// A wide weight's prefill goes in token chunks, each row tile packed once per chunk (at
// least 128 tokens a chunk for the packing kernels, matmul_fast.cpp): 140 tokens over 8192
// columns are two chunks, and every token must keep its bits alone, in its chunk or the next.
TEST_CASE("matmul_fast: a wide weight's token chunks keep each token's bits", "[cpu]") {
  std::mt19937 rng(7);
  const int64_t n = 8192, d = 19, n_tokens = 140;
  const std::vector<float> x = make_x(n_tokens, n, rng);
  for (GgmlType type : {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K,
                        GgmlType::Q6_K, GgmlType::IQ4_XS, GgmlType::Q5_0, GgmlType::IQ4_NL}) {
    const Weight w = make_weight(type, d, n, rng);
    for (MatmulIsa isa : isas()) {
      for (bool repacked : {false, true}) {
        if (repacked && !repack_supported(type, isa)) continue;
        INFO(ggml_type_name(type) << " isa " << static_cast<int>(isa) << " repacked " << repacked);
        const std::vector<float> batch =
            run(isa, w, x, n_tokens, 2, MatmulPrecision::Fast, repacked);
        int64_t differ = 0;
        for (int64_t t = 0; t < n_tokens; ++t) {
          const std::vector<float> one(x.begin() + t * n, x.begin() + (t + 1) * n);
          const std::vector<float> alone = run(isa, w, one, 1, 1, MatmulPrecision::Fast, repacked);
          differ += same_bits(alone.data(), batch.data() + t * d, d) ? 0 : 1;
        }
        CHECK(differ == 0);
      }
    }
  }
}

// Q5 weights at the top of their range (q = 31 in every element: nibbles 0xF, qh all ones)
// against activations at +-127: a block's products reach 31 * 127 * 32, past int16, so a
// kernel that sums the steps in int16 (as the 4-bit path may) would wrap.
TEST_CASE("matmul_fast: Q5_0 and Q5_1 at q = 31 do not overflow", "[cpu]") {
  std::mt19937 rng(8);
  for (GgmlType type : {GgmlType::Q5_0, GgmlType::Q5_1}) {
    Weight w = make_weight(type, 11, 256, rng);
    const size_t bs = ggml_traits(type).type_size, qh = type == GgmlType::Q5_0 ? 2 : 4;
    for (size_t b = 0; b < w.bytes.size() / bs; ++b)
      std::memset(w.bytes.data() + b * bs + qh, 0xFF, bs - qh);  // qh and qs: q = 31
    std::vector<float> x(static_cast<size_t>(3 * w.n), 1.0f);
    for (size_t i = 0; i < x.size(); i += 7) x[i] = 0.25f;  // q_x = 127 in most lanes
    for (size_t i = static_cast<size_t>(w.n); i < x.size(); ++i) x[i] = -x[i];
    for (MatmulIsa isa : isas()) check_against_reference(w, x, 3, run(isa, w, x, 3, 1));
  }
}

// w under `precision` gives exactly the F32 kernel's bits on w decoded, for every tile shape
// (decode and prefill), instruction set and thread count.
void check_same_as_decoded(const Weight& w, MatmulPrecision precision, std::mt19937& rng) {
  const Weight f = decoded(w);
  for (int64_t n_tokens : {1, 6, 40}) {
    const std::vector<float> x = make_x(n_tokens, w.n, rng);
    for (MatmulIsa isa : isas())
      for (int n_threads : {1, 3}) {
        INFO(ggml_type_name(w.type) << " n_tokens " << n_tokens << " threads " << n_threads);
        CHECK(same_bits(run(isa, w, x, n_tokens, n_threads, precision).data(),
                        run(isa, f, x, n_tokens, n_threads).data(), w.d * n_tokens));
      }
  }
}

// The dequantizing kernel's contract (MatmulPrecision::Float runs it for every quantized type):
// exactly the F32 kernel on the dequantized weight, for every tile shape (decode and prefill)
// and thread count, and no stale rows when one call's weight is replaced by another at the same
// address (the row cache is per call).
TEST_CASE("matmul_fast: dequantizing kernel equals the F32 kernel on the decoded weight", "[cpu]") {
  std::mt19937 rng(77);
  for (GgmlType type : {GgmlType::Q2_K, GgmlType::Q3_K}) {
    Weight w = make_weight(type, 23, 512, rng);
    check_same_as_decoded(w, MatmulPrecision::Float, rng);
    // Same buffer, new contents: the next call must not reuse the first call's decoded rows.
    const std::vector<float> x = make_x(1, w.n, rng);
    ThreadPool pool(1);
    MatmulScratch scratch;
    std::vector<float> out1(static_cast<size_t>(w.d)), out2(static_cast<size_t>(w.d));
    matmul_fast(w.view(), x.data(), 1, out1.data(), pool, scratch, MatmulPrecision::Float);
    const Weight other = make_weight(type, w.d, w.n, rng);
    w.bytes = other.bytes;  // same size: the vector keeps its buffer
    matmul_fast(w.view(), x.data(), 1, out2.data(), pool, scratch, MatmulPrecision::Float);
    CHECK(same_bits(out2.data(),
                    run(MatmulIsa::Auto, other, x, 1, 1, MatmulPrecision::Float).data(), w.d));
    CHECK_FALSE(same_bits(out1.data(), out2.data(), w.d));
  }
}

// MatmulPrecision::Float (rope-probe's backend): the integer-kernel dtypes and F16 multiply the
// f32 activations, i.e. give exactly the F32 kernel's bits on the decoded weight (so the F32
// kernel's batch and thread invariance and its error bound carry over), where the Fast path
// differs by the int8 / f16 rounding of the activations.
TEST_CASE("matmul_fast: Float precision equals the F32 kernel on the decoded weight", "[cpu]") {
  std::mt19937 rng(31);
  for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0,
                        GgmlType::Q5_1, GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::Q2_K,
                        GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K,
                        GgmlType::MXFP4, GgmlType::F16}) {
    const Weight w = make_weight(type, 23, 512, rng);
    check_same_as_decoded(w, MatmulPrecision::Float, rng);
    // ... where the Fast path does not (int8 or f16 activations).
    const std::vector<float> x = make_x(6, w.n, rng);
    CHECK_FALSE(same_bits(run(MatmulIsa::Auto, w, x, 6, 1, MatmulPrecision::Float).data(),
                          run(MatmulIsa::Auto, w, x, 6, 1).data(), w.d * 6));
  }
  CHECK(std::string(matmul_fast_kernel_name(GgmlType::Q4_1, MatmulPrecision::Float))
            .rfind("dequant+f32", 0) == 0);
  CHECK(std::string(matmul_fast_kernel_name(GgmlType::F16, MatmulPrecision::Float))
            .rfind("f16 f32-activations", 0) == 0);
  CHECK(std::string(matmul_fast_kernel_name(GgmlType::F32, MatmulPrecision::Float)) ==
        matmul_fast_kernel_name(GgmlType::F32));
}
