// K-quant and IQ4 encoders (quant/quantize_k.cpp, quantize_iq4.cpp) and the importance-weighted
// Q4_0 .. Q5_1 encoders (quant/quantize_legacy_weighted.cpp). Their bytes must be llama.cpp's:
// the golden test compares them byte for byte with ggml's own quantizer
// (tests/fixtures/kquant_golden.bin, written by tools/gen_kquant_golden.py through ctypes from
// the reference engine's libggml-base.so), with and without an importance matrix, and so for
// Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0. The other tests check what any encoder of these layouts
// must give: bounded round-trip error, error no worse than the simple types of similar size,
// edge cases; and for Q4_0 .. Q5_1 that the weights lower the weighted error.
#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "core/error.h"
#include "quant/dequant.h"
#include "quant/quantize.h"
#include "support/fixtures.h"
#include "support/test_data.h"

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
constexpr GgmlType kAllKTypes[] = {GgmlType::Q2_K, GgmlType::Q3_K,   GgmlType::Q4_K,  GgmlType::Q5_K,
                                   GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS};

}  // namespace

TEST_CASE("k-quant sizes and names", "[cpu]") {
  CHECK(quantized_size(GgmlType::Q4_K, 512) == 288);
  CHECK(quantized_size(GgmlType::Q5_K, 256) == 176);
  CHECK(quantized_size(GgmlType::Q6_K, 256) == 210);
  CHECK(quantized_size(GgmlType::Q5_0, 64) == 44);
  CHECK(quantized_size(GgmlType::Q5_1, 64) == 48);
  CHECK_THROWS_WITH(quantized_size(GgmlType::Q4_K, 64), Catch::Contains("blocks of 256"));
  CHECK(quantized_size(GgmlType::Q2_K, 256) == 84);
  CHECK(quantized_size(GgmlType::Q3_K, 256) == 110);
  CHECK(quantized_size(GgmlType::IQ4_NL, 64) == 36);
  CHECK(quantized_size(GgmlType::IQ4_XS, 256) == 136);
  for (GgmlType t : kAllKTypes) CHECK(can_quantize(t));
  CHECK_FALSE(can_quantize(GgmlType::IQ2_XXS));
}

// The low-bit types' edge cases (their bytes are checked by the golden test): all zero decodes
// to exact zeros, with and without weights; NaN and Inf are refused before anything is written.
TEST_CASE("Q2_K Q3_K IQ4_NL IQ4_XS: all zero and non-finite input", "[cpu]") {
  for (GgmlType t : kAllKTypes) {
    INFO(ggml_type_name(t));
    std::vector<float> x(512, 0.0f), w(256, 1.0f);
    for (float v : decode(t, encode(t, x, 512), 512)) REQUIRE(v == 0.0f);
    for (float v : decode(t, encode(t, x, 256, w.data()), 512)) REQUIRE(v == 0.0f);
    x[300] = std::numeric_limits<float>::infinity();
    std::vector<uint8_t> out(quantized_size(t, 512), 0xCD);
    CHECK_THROWS_WITH(quantize_tensor(t, "blk.0.ffn_up.weight", x.data(), out.data(), 2, 256),
                      Catch::Contains("row 1") && Catch::Contains("column 44"));
    CHECK(std::all_of(out.begin(), out.end(), [](uint8_t b) { return b == 0xCD; }));
  }
}

// A k-quant sub-block of 32 (Q4_K, Q5_K) or 16 (Q6_K) elements spans its own range with
// 2^b levels, so the rounding error alone is at most half a step, and RMSE is about
// step / sqrt(12). On top come the 6-bit (8-bit for Q6_K) scale quantization and the
// constraint that the min is <= 0 (Q6_K is symmetric: data offset from zero, as in the
// rows with offset here, leaves half its levels unused). Worst measured RMSE / (super-block
// range) over these rows, llama.cpp's encoders: 0.0147 (Q4_K), 0.0074 (Q5_K), 0.0066 (Q6_K);
// bounds 1.3-1.5x.
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
// 64 rows of 4096 normal weights: Q4_K/Q4_1 0.91, Q5_K/Q5_1 0.95, Q6_K/Q5_1 0.47.
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
                     GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K,
                     GgmlType::IQ4_NL, GgmlType::IQ4_XS}) {
    std::vector<uint8_t> a(quantized_size(t, 1024));
    quantize_row(t, x.data(), a.data(), 1024);
    CHECK(encode(t, x, 512) == a);
  }
}

// llama.cpp's weighted fit of the 32-element types (weights imatrix * sqrt(sigma2 + x^2)) does
// not try the RTN block, so one block may come out worse in sum_j w_j (x_j - x'_j)^2; over a
// matrix of 4 rows it is better in each of these 40 seeded cases, and clearly on average.
// Random rows with random heavy-tailed weights (what an importance matrix looks like: a few
// columns with large activations).
TEST_CASE("weighted Q4_0 .. Q5_1 lower the weighted error against RTN", "[cpu]") {
  std::mt19937 rng(21);
  std::lognormal_distribution<float> heavy(0.0f, 1.5f);
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1}) {
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

namespace {

// tests/fixtures/kquant_golden.bin (format in tools/gen_kquant_golden.py).
struct GoldenMatrix {
  uint32_t rows = 0, cols = 0;
  std::vector<float> x, imatrix;
};
struct GoldenResult {
  uint32_t matrix = 0, type = 0, with_imatrix = 0;
  std::vector<uint8_t> bytes;
};

class Reader {
 public:
  explicit Reader(std::vector<char> data) : data_(std::move(data)) {}
  uint32_t u32() {
    uint32_t v = 0;
    take(&v, 4);
    return v;
  }
  void take(void* out, size_t n) {
    REQUIRE(pos_ + n <= data_.size());
    std::memcpy(out, data_.data() + pos_, n);
    pos_ += n;
  }
  bool done() const { return pos_ == data_.size(); }

 private:
  std::vector<char> data_;
  size_t pos_ = 0;
};

void read_golden(std::vector<GoldenMatrix>& matrices, std::vector<GoldenResult>& results) {
  std::ifstream in(llmctl::test::fixture_path("kquant_golden.bin"), std::ios::binary);
  REQUIRE(in);
  Reader r(std::vector<char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()));
  char magic[4];
  r.take(magic, 4);
  REQUIRE(std::memcmp(magic, "KQG1", 4) == 0);
  matrices.resize(r.u32());
  for (GoldenMatrix& m : matrices) {
    m.rows = r.u32();
    m.cols = r.u32();
    m.x.resize(size_t{m.rows} * m.cols);
    m.imatrix.resize(m.cols);
    r.take(m.x.data(), m.x.size() * 4);
    r.take(m.imatrix.data(), m.imatrix.size() * 4);
  }
  results.resize(r.u32());
  for (GoldenResult& g : results) {
    g.matrix = r.u32();
    g.type = r.u32();
    g.with_imatrix = r.u32();
    g.bytes.resize(r.u32());
    r.take(g.bytes.data(), g.bytes.size());
  }
  REQUIRE(r.done());
}

std::string hex(const uint8_t* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) s += {digits[p[i] >> 4], digits[p[i] & 15]};
  return s;
}

}  // namespace

// The bytes llama.cpp writes, for the K-quants, IQ4 and Q4_0 .. Q8_0: ggml_quantize_chunk() of
// the reference engine's ggml (the ref quantizers without an importance matrix, the _impl ones
// with it) on seeded matrices whose
// rows span normal, uniform, heavy-tailed, one-signed, constant, sparse, all-zero, tiny
// (below fp16's range for the scales), huge and exactly-tied values.
TEST_CASE("quantized blocks are byte-identical to llama.cpp's quantizer", "[cpu][golden]") {
  std::vector<GoldenMatrix> matrices;
  std::vector<GoldenResult> results;
  read_golden(matrices, results);
  int checked = 0;
  for (const GoldenResult& g : results) {
    const auto type = static_cast<GgmlType>(g.type);
    const GoldenMatrix& m = matrices.at(g.matrix);
    INFO(ggml_type_name(type) << ", matrix " << g.matrix << " (" << m.rows << " x " << m.cols
                              << "), " << (g.with_imatrix ? "with" : "without")
                              << " importance matrix");
    std::vector<uint8_t> out(g.bytes.size(), 0xAB);
    REQUIRE(quantized_size(type, int64_t{m.rows} * m.cols) == out.size());
    quantize_rows(type, m.x.data(), out.data(), m.rows, m.cols,
                  g.with_imatrix ? m.imatrix.data() : nullptr);
    const size_t bb = ggml_traits(type).type_size, be = ggml_traits(type).block_size;
    size_t differing = 0, first = out.size();
    for (size_t b = 0; b < out.size() / bb; ++b)
      if (std::memcmp(out.data() + b * bb, g.bytes.data() + b * bb, bb) != 0) {
        ++differing;
        if (first == out.size()) first = b;
      }
    if (differing > 0) {
      const size_t row = first * be / m.cols, col = first * be % m.cols;
      INFO(differing << " of " << out.size() / bb << " blocks differ; the first is block "
                     << first << " (row " << row << ", column " << col << ")\n ours:  "
                     << hex(out.data() + first * bb, bb) << "\n ggml's: "
                     << hex(g.bytes.data() + first * bb, bb));
      CHECK(differing == 0);
    }
    ++checked;
  }
  // (7 K-quant and IQ4 types + Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) x 3 matrices, and the 6 types
  // with 32-element blocks on the fourth (rows of 160), each with and without the matrix.
  CHECK(checked == (12 * 3 + 6) * 2);
}

namespace {

// tools/gen_kquant_golden.py's SplitMix64 and generated_matrix(): values the test computes
// itself (integers times powers of two, exact in float32), so the fixture holds only hashes.
class GoldenRng {
 public:
  explicit GoldenRng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    state_ += 0x9E3779B97F4A7C15ull;
    uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  int64_t u22() { return static_cast<int64_t>(next() >> 42); }

 private:
  uint64_t state_;
};

float pow2(int64_t v, int64_t e) {
  return std::ldexp(static_cast<float>(v), static_cast<int>(e));
}

void generated_matrix(int64_t rows, int64_t cols, uint64_t seed, std::vector<float>& x,
                      std::vector<float>& w) {
  GoldenRng g(seed);
  x.assign(static_cast<size_t>(rows * cols), 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t kind = r % 8, e = 23 + (r / 8) % 12;
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t bell = g.u22() + g.u22() + g.u22() + g.u22() - (int64_t{1} << 23);
      const int64_t u = g.u22();
      float v = 0;
      switch (kind) {
        case 0: v = pow2(bell, -e); break;
        case 1: v = pow2(u - (int64_t{1} << 21), -e + 2); break;
        case 2: v = (u & 7) == 0 ? pow2(bell, -e) : 0.0f; break;
        case 3: v = pow2(u % 9 - 4, -((r / 8) % 5)); break;
        case 4: v = pow2(bell, -e + ((u & 255) == 0 ? 6 : 0)); break;
        case 5: v = pow2(bell < 0 ? -bell : bell, -e); break;
        case 6: v = pow2(u % 33 - 16, -4); break;
        default: v = pow2(bell, -e - (c / 32) % 6); break;
      }
      x[static_cast<size_t>(r * cols + c)] = v;
    }
  }
  w.assign(static_cast<size_t>(cols), 0.0f);
  for (int64_t c = 0; c < cols; ++c) {
    const int64_t u = g.u22(), k = g.u22();
    w[static_cast<size_t>(c)] = (k & 15) == 0 ? 0.0f : pow2(u + 1, -22 + (k >> 4) % 8);
  }
}

uint64_t fnv1a64(const uint8_t* p, size_t n) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001B3ull;
  return h;
}

}  // namespace

// The larger set: 256 generated rows of 1024 (8 kinds: bell-shaped at 12 scales, uniform,
// sparse, small integers, outliers, one-signed, sixteenths, sub-blocks at 6 scales), each row's
// bytes hashed, every type with and without a generated importance matrix.
TEST_CASE("quantized rows hash to llama.cpp's on a generated matrix", "[cpu][golden]") {
  const auto doc = nlohmann::json::parse(
      llmctl::test::read_file(llmctl::test::fixture_path("kquant_golden_rows.json")));
  const int64_t rows = doc["rows"], cols = doc["cols"];
  std::vector<float> x, w;
  generated_matrix(rows, cols, doc["seed"].get<uint64_t>(), x, w);
  int checked = 0;
  for (const auto& [key, hashes] : doc["hashes"].items()) {
    const bool weighted = key.find("+imatrix") != std::string::npos;
    const std::string name = key.substr(0, key.find('+'));
    const auto type = ggml_type_from_name(name);
    REQUIRE(type.has_value());
    INFO(key);
    std::vector<uint8_t> out(quantized_size(*type, rows * cols));
    quantize_rows(*type, x.data(), out.data(), rows, cols, weighted ? w.data() : nullptr);
    const size_t row_bytes = out.size() / static_cast<size_t>(rows);
    int differing = 0, first = -1;
    for (int64_t r = 0; r < rows; ++r) {
      const std::string got = fmt::format(
          "{:016x}", fnv1a64(out.data() + static_cast<size_t>(r) * row_bytes, row_bytes));
      if (got != hashes.at(static_cast<size_t>(r)).get<std::string>()) {
        ++differing;
        if (first < 0) first = static_cast<int>(r);
      }
    }
    INFO(differing << " of " << rows << " rows differ; the first is row " << first
                   << " (kind " << first % 8 << ")");
    CHECK(differing == 0);
    ++checked;
  }
  CHECK(checked == 24);  // 12 types, with and without the importance matrix
}
