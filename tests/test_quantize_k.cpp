// Q4_K, Q5_K, Q6_K encoders (quant/quantize_k.cpp) and the importance-weighted search
// (quant/quantize_search.cpp). The k-quant bytes have no reference (llama.cpp's quantizer is
// a search, and so is ours); the layout is checked against gguf-py in test_dequant.cpp, so
// here we test what the search promises: bounded round-trip error, error no worse than the
// simple types of similar size, edge cases, and weighted search never worse than RTN.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/error.h"
#include "quant/dequant.h"
#include "quant/quantize.h"

using namespace llmctl;

namespace {

std::vector<uint8_t> encode(GgmlType type, const std::vector<float>& x, int64_t row_len,
                            const float* w = nullptr) {
  const auto n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> out(quantized_size(type, n), 0xAB);
  quantize_rows(type, x.data(), out.data(), n / row_len, row_len, w);
  return out;
}

std::vector<float> decode(GgmlType type, const std::vector<uint8_t>& q, size_t n) {
  std::vector<float> y(n);
  dequantize_row(type, q.data(), y.data(), static_cast<int64_t>(n));
  return y;
}

// sum_j w[j % row_len] (x - x')^2 over the row(s).
double weighted_err(const std::vector<float>& x, const std::vector<float>& y,
                    const std::vector<float>* w) {
  double e = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double d = static_cast<double>(x[i]) - static_cast<double>(y[i]);
    e += (w != nullptr ? static_cast<double>((*w)[i % w->size()]) : 1.0) * d * d;
  }
  return e;
}

double rmse(GgmlType type, const std::vector<float>& x) {
  const auto y = decode(type, encode(type, x, static_cast<int64_t>(x.size())), x.size());
  return std::sqrt(weighted_err(x, y, nullptr) / static_cast<double>(x.size()));
}

std::vector<float> normal_row(std::mt19937& rng, size_t n, float scale, float offset = 0.0f) {
  std::normal_distribution<float> dist(offset, scale);
  std::vector<float> x(n);
  for (float& v : x) v = dist(rng);
  return x;
}

constexpr GgmlType kKQuants[] = {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

}  // namespace

TEST_CASE("k-quant sizes and names", "[cpu]") {
  CHECK(quantized_size(GgmlType::Q4_K, 512) == 288);
  CHECK(quantized_size(GgmlType::Q5_K, 256) == 176);
  CHECK(quantized_size(GgmlType::Q6_K, 256) == 210);
  CHECK(quantized_size(GgmlType::Q5_0, 64) == 44);
  CHECK(quantized_size(GgmlType::Q5_1, 64) == 48);
  CHECK_THROWS_WITH(quantized_size(GgmlType::Q4_K, 64), Catch::Contains("blocks of 256"));
  for (GgmlType t : kKQuants) CHECK(can_quantize(t));
  CHECK_FALSE(can_quantize(GgmlType::Q3_K));
}

// A k-quant sub-block of 32 (Q4_K, Q5_K) or 16 (Q6_K) elements spans its own range with
// 2^b levels, so the rounding error alone is at most half a step, and RMSE is about
// step / sqrt(12). On top come the 6-bit (8-bit for Q6_K) scale quantization and the
// constraint that the min is <= 0 (Q6_K is symmetric: data offset from zero, as in the
// rows with offset here, leaves half its levels unused). Worst measured RMSE / (super-block
// range) over these rows: 0.0144 (Q4_K), 0.0074 (Q5_K), 0.0057 (Q6_K); bounds 1.5x.
TEST_CASE("k-quant round trip: RMSE relative to the block range is bounded", "[cpu]") {
  std::mt19937 rng(11);
  struct Bound {
    GgmlType type;
    double max_rel;
  };
  for (const Bound b : {Bound{GgmlType::Q4_K, 0.0216}, Bound{GgmlType::Q5_K, 0.0111},
                        Bound{GgmlType::Q6_K, 0.0086}}) {
    double worst = 0;
    for (float scale : {1e-3f, 0.02f, 1.0f, 300.0f}) {
      for (int rep = 0; rep < 8; ++rep) {
        const auto x = normal_row(rng, 256, scale, rep % 4 == 3 ? 2.0f * scale : 0.0f);
        const auto [lo, hi] = std::minmax_element(x.begin(), x.end());
        worst = std::max(worst, rmse(b.type, x) / static_cast<double>(*hi - *lo));
      }
    }
    INFO(ggml_type_name(b.type) << " worst RMSE / range = " << worst);
    CHECK(worst < b.max_rel);
  }
}

// The promise that makes k-quants worth having: Q4_K (4.5 bpw) is no worse than Q4_1 (5.0),
// Q5_K (5.5) no worse than Q5_1 (6.0), Q6_K (6.56) at most half Q5_1's error. Measured over
// 64 rows of 4096 normal weights: Q4_K/Q4_1 0.91, Q5_K/Q5_1 0.95, Q6_K/Q5_1 0.46.
TEST_CASE("k-quant RMSE is at most a stated factor of the simple types'", "[cpu]") {
  std::mt19937 rng(5);
  double e[5] = {0, 0, 0, 0, 0};
  const GgmlType types[5] = {GgmlType::Q4_1, GgmlType::Q4_K, GgmlType::Q5_1, GgmlType::Q5_K,
                             GgmlType::Q6_K};
  for (int rep = 0; rep < 64; ++rep) {
    const auto x = normal_row(rng, 4096, 0.02f);
    for (int t = 0; t < 5; ++t) e[t] += rmse(types[t], x);
  }
  INFO("Q4_K/Q4_1 " << e[1] / e[0] << ", Q5_K/Q5_1 " << e[3] / e[2] << ", Q6_K/Q5_1 "
                    << e[4] / e[2]);
  CHECK(e[1] <= 1.0 * e[0]);
  CHECK(e[3] <= 1.0 * e[2]);
  CHECK(e[4] <= 0.5 * e[2]);
}

TEST_CASE("k-quant edge cases: all zero, one outlier, NaN", "[cpu]") {
  for (GgmlType t : kKQuants) {
    INFO(ggml_type_name(t));
    // All zero: decodes to exact zeros.
    std::vector<float> x(512, 0.0f);
    for (float v : decode(t, encode(t, x, 512), 512)) REQUIRE(v == 0.0f);
    // One outlier among small values: the outlier is kept to within one step of its
    // sub-block (1000 / 15 for Q4_K), and the small values, whose sub-block scales round to
    // little next to the outlier's, are never off by more than their own magnitude.
    std::mt19937 rng(3);
    x = normal_row(rng, 256, 0.01f);
    x[77] = 1000.0f;
    const auto y = decode(t, encode(t, x, 256), 256);
    CHECK(std::fabs(y[77] - 1000.0f) < 1000.0f / 15.0f);
    for (size_t i = 0; i < x.size(); ++i)
      if (i / 16 != 77 / 16 && i / 32 != 77 / 32) CHECK(std::fabs(y[i] - x[i]) <= 0.1f);
    // Same value everywhere: reproduced to within fp16 and 6-bit scale rounding.
    x.assign(256, -0.3f);
    for (float v : decode(t, encode(t, x, 256), 256)) CHECK(std::fabs(v + 0.3f) < 0.01f);
    // NaN or Inf: an error naming the tensor and position, nothing written.
    x.assign(512, 0.5f);
    x[300] = std::numeric_limits<float>::quiet_NaN();
    std::vector<uint8_t> out(quantized_size(t, 512), 0xCD);
    CHECK_THROWS_WITH(quantize_tensor(t, "blk.0.ffn_up.weight", x.data(), out.data(), 2, 256),
                      Catch::Contains("blk.0.ffn_up.weight") && Catch::Contains("row 1") &&
                          Catch::Contains("column 44"));
    CHECK(std::all_of(out.begin(), out.end(), [](uint8_t b) { return b == 0xCD; }));
    x[300] = std::numeric_limits<float>::infinity();
    CHECK_THROWS_AS(quantize_row(t, x.data(), out.data(), 512), Error);
  }
}

TEST_CASE("quantize_rows without weights gives quantize_row's bytes", "[cpu]") {
  std::mt19937 rng(9);
  const auto x = normal_row(rng, 1024, 0.05f);
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
                     GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
    std::vector<uint8_t> a(quantized_size(t, 1024));
    quantize_row(t, x.data(), a.data(), 1024);
    CHECK(encode(t, x, 512) == a);
  }
}

// The RTN block is the first candidate of the weighted search (and the unweighted encoding
// for the k-quants), so with any weights the weighted error can only go down. Random blocks
// with random heavy-tailed weights (what an importance matrix looks like: a few columns with
// large activations).
TEST_CASE("weighted search never has a larger weighted error than RTN", "[cpu]") {
  std::mt19937 rng(21);
  std::lognormal_distribution<float> heavy(0.0f, 1.5f);
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q4_K,
                     GgmlType::Q5_K, GgmlType::Q6_K}) {
    INFO(ggml_type_name(t));
    double total_rtn = 0, total_w = 0;
    for (int rep = 0; rep < 40; ++rep) {
      const int64_t row_len = 256;
      std::vector<float> w(static_cast<size_t>(row_len));
      for (float& v : w) v = heavy(rng);
      if (rep % 10 == 0) std::fill(w.begin(), w.end(), 1.0f);       // plain least squares
      if (rep % 10 == 1) std::fill(w.begin() + 64, w.end(), 0.0f);  // dead columns
      const auto x = normal_row(rng, 1024, rep % 3 == 0 ? 1.0f : 0.02f, rep % 4 == 0 ? 0.01f : 0);
      const auto plain = decode(t, encode(t, x, row_len), x.size());
      const auto weighted = decode(t, encode(t, x, row_len, w.data()), x.size());
      const double e_rtn = weighted_err(x, plain, &w), e_w = weighted_err(x, weighted, &w);
      REQUIRE(e_w <= e_rtn);
      total_rtn += e_rtn / (e_rtn + 1e-30);
      total_w += e_w / (e_rtn + 1e-30);
    }
    // And it helps: on average the weighted error is clearly below RTN's.
    INFO("mean weighted error / RTN's = " << total_w / total_rtn);
    CHECK(total_w < 0.95 * total_rtn);
  }
}

TEST_CASE("quantize_rows rejects bad column weights", "[cpu]") {
  std::vector<float> x(64, 0.25f), w(32, 1.0f);
  std::vector<uint8_t> out(quantized_size(GgmlType::Q4_0, 64));
  w[3] = -1.0f;
  CHECK_THROWS_WITH(quantize_rows(GgmlType::Q4_0, x.data(), out.data(), 2, 32, w.data()),
                    Catch::Contains("column weight 3"));
  w[3] = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_AS(quantize_rows(GgmlType::Q4_0, x.data(), out.data(), 2, 32, w.data()), Error);
}
