// Reference quantization (src/quant/quantize.h) against golden bytes from gguf-py, cross-checked
// in the generator against a transcription of ggml's C reference rules. The fixture
// tests/fixtures/quant_golden.txt is regenerated with
//     python3 tools/gen_quant_fixture.py > tests/fixtures/quant_golden.txt
// (needs `pip install gguf numpy`).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <vector>

#include "core/error.h"
#include "core/fp16.h"
#include "quant/dequant.h"
#include "quant/quantize.h"
#include "support/fixtures.h"
#include "support/golden_text.h"

using namespace llmctl;

namespace {

using test::hex;
using test::unhex;

struct Golden {
  std::map<std::string, std::vector<float>> inputs;  // case name -> row
  struct Out {
    std::string type, name;
    std::vector<uint8_t> bytes;
  };
  std::vector<Out> outputs;
};

Golden load_golden() {
  std::ifstream in(llmctl::test::fixture_path("quant_golden.txt"));
  REQUIRE(in);
  Golden g;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ss(line);
    std::string tag;
    ss >> tag;
    if (tag == "IN") {
      std::string name, h;
      int64_t n = 0;
      ss >> name >> n >> h;
      REQUIRE(ss);
      const auto bytes = unhex(h);
      REQUIRE(bytes.size() == static_cast<size_t>(n) * 4);
      std::vector<float> row(static_cast<size_t>(n));
      std::memcpy(row.data(), bytes.data(), bytes.size());
      g.inputs[name] = std::move(row);
    } else {
      REQUIRE(tag == "OUT");
      Golden::Out o;
      std::string h;
      ss >> o.type >> o.name >> h;
      REQUIRE(ss);
      o.bytes = unhex(h);
      g.outputs.push_back(std::move(o));
    }
  }
  return g;
}

std::vector<uint8_t> quantize(GgmlType type, const std::vector<float>& x) {
  const auto n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> out(quantized_size(type, n), 0xAB);
  quantize_row(type, x.data(), out.data(), n);
  return out;
}

std::vector<float> dequantize(GgmlType type, const std::vector<uint8_t>& q, size_t n) {
  std::vector<float> out(n);
  dequantize_row(type, q.data(), out.data(), static_cast<int64_t>(n));
  return out;
}

std::vector<float> random_row(std::mt19937& rng, size_t n, float scale, float offset = 0.0f) {
  std::normal_distribution<float> dist(offset, scale);
  std::vector<float> x(n);
  for (float& v : x) v = dist(rng);
  return x;
}

float read_half(const uint8_t* p) { return fp16_to_f32(load_u16_le(p)); }

}  // namespace

TEST_CASE("quantize_row matches the golden bytes for every case and type", "[cpu][golden]") {
  const Golden g = load_golden();
  std::map<std::string, int> per_type;
  for (const Golden::Out& o : g.outputs) {
    const auto type = ggml_type_from_name(o.type);
    REQUIRE(type);
    const auto it = g.inputs.find(o.name);
    REQUIRE(it != g.inputs.end());
    const auto got = quantize(*type, it->second);
    INFO(o.type << " " << o.name << "\n got  " << hex(got) << "\n want " << hex(o.bytes));
    CHECK(got == o.bytes);
    ++per_type[o.type];
  }
  CHECK(g.inputs.size() >= 40);
  for (const char* t : {"F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1"})
    CHECK(per_type[t] == 44);
}

TEST_CASE("quantize rounding rules on hand-checked blocks", "[cpu]") {
  // Q8_0 with d = 1: ties go away from zero.
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f, x[1] = 2.5f, x[2] = -2.5f, x[3] = 0.5f, x[4] = -0.5f;
  auto q = quantize(GgmlType::Q8_0, x);
  CHECK(load_u16_le(q.data()) == 0x3C00);
  CHECK(static_cast<int8_t>(q[3]) == 3);
  CHECK(static_cast<int8_t>(q[4]) == -3);
  CHECK(static_cast<int8_t>(q[5]) == 1);
  CHECK(static_cast<int8_t>(q[6]) == -1);
  // Q4_0 with max = -8 (d = 1): x*id + 8.5 truncated, so ties go up; +8 clamps to 15.
  x.assign(32, 0.0f);
  x[0] = -8.0f, x[1] = -0.5f, x[2] = 0.5f, x[3] = 7.5f, x[16] = 7.9f;
  q = quantize(GgmlType::Q4_0, x);
  CHECK(load_u16_le(q.data()) == 0x3C00);
  CHECK((q[2] & 15) == 0);   // -8 -> q 0
  CHECK((q[3] & 15) == 8);   // -0.5 -> 0
  CHECK((q[4] & 15) == 9);   // 0.5 -> 1
  CHECK((q[5] & 15) == 15);  // 7.5 -> 16, clamped to 15
  CHECK((q[2] >> 4) == 15);  // 7.9 -> 16, clamped
  // x * id is rounded to float before 8.5 is added (no fused multiply-add): with max = -7,
  // x = -3.9375 gives x*id = -4.5 after rounding, so q = trunc(4.0) = 4; fused it would be 3.
  x.assign(32, 0.0f);
  x[0] = -7.0f, x[1] = -3.9375f;
  q = quantize(GgmlType::Q4_0, x);
  CHECK((q[3] & 15) == 4);
  // An all-zero block: max stays +0, d = +0 / -8 = -0.
  x.assign(32, 0.0f);
  q = quantize(GgmlType::Q4_0, x);
  CHECK(load_u16_le(q.data()) == 0x8000);
  CHECK(q[2] == 0x88);
  // Q4_1 all equal: d = 0, q = 0, m = the value.
  x.assign(32, -3.25f);
  q = quantize(GgmlType::Q4_1, x);
  CHECK(load_u16_le(q.data()) == 0);
  CHECK(read_half(q.data() + 2) == -3.25f);
  CHECK(q[4] == 0);
  // Q4_1 ties go up: min 0, max 15, d = 1.
  x.assign(32, 0.0f);
  x[1] = 15.0f, x[2] = 2.5f;
  q = quantize(GgmlType::Q4_1, x);
  CHECK((q[4 + 2] & 15) == 3);
}

TEST_CASE("Q5_0 and Q5_1 rounding rules and bit packing on hand-checked blocks", "[cpu]") {
  // Q5_0 with max = -16 (d = 1): q = trunc(x + 16.5), ties up; +16 clamps to 31.
  std::vector<float> x(32, 0.0f);
  x[0] = -16.0f, x[1] = -0.5f, x[2] = 0.5f, x[3] = 15.5f, x[17] = 3.0f, x[18] = -9.0f;
  auto q = quantize(GgmlType::Q5_0, x);
  REQUIRE(q.size() == 22);
  CHECK(load_u16_le(q.data()) == 0x3C00);
  auto q5 = [&](int j) { return q5_value(q.data() + 2, q.data() + 6, j); };
  CHECK(q5(0) == 0);    // -16
  CHECK(q5(1) == 16);   // -0.5 -> trunc(16.0)
  CHECK(q5(2) == 17);   // 0.5 -> trunc(17.0)
  CHECK(q5(3) == 31);   // 15.5 -> 32, clamped
  CHECK(q5(17) == 19);  // element 17: high nibble of byte 1, bit 17 of qh
  CHECK(q5(18) == 7);
  CHECK((q[6 + 1] >> 4) == (19 & 15));
  CHECK(((q[2 + 2] >> 1) & 1) == 1);  // qh bit 17 (byte 2, bit 1): 19 has bit 4 set
  // All zero: max stays +0, d = -0, every q = 16 (value 0).
  q = quantize(GgmlType::Q5_0, std::vector<float>(32, 0.0f));
  CHECK(load_u16_le(q.data()) == 0x8000);
  CHECK(load_u16_le(q.data() + 2) == 0xffff);  // bit 4 of 16 set for all 32 elements
  CHECK(q[6] == 0x00);
  // One large outlier: it takes the end of the range, the rest round to 16 +- 0.
  x.assign(32, 0.001f);
  x[5] = 1000.0f;
  q = quantize(GgmlType::Q5_0, x);
  CHECK(read_half(q.data()) == -62.5f);  // d = 1000 / -16
  CHECK(q5_value(q.data() + 2, q.data() + 6, 5) == 0);
  CHECK(q5_value(q.data() + 2, q.data() + 6, 6) == 16);
  // Q5_1 with min 0, max 31 (d = 1): q = trunc(x + 0.5), ties up.
  x.assign(32, 0.0f);
  x[1] = 31.0f, x[2] = 2.5f, x[3] = 16.49f, x[20] = 30.5f;
  q = quantize(GgmlType::Q5_1, x);
  REQUIRE(q.size() == 24);
  CHECK(load_u16_le(q.data()) == 0x3C00);
  CHECK(read_half(q.data() + 2) == 0.0f);
  auto q51 = [&](int j) { return q5_value(q.data() + 4, q.data() + 8, j); };
  CHECK(q51(1) == 31);
  CHECK(q51(2) == 3);
  CHECK(q51(3) == 16);
  CHECK(q51(20) == 31);
  // All equal: d = 0, q = 0, m = the value.
  q = quantize(GgmlType::Q5_1, std::vector<float>(32, 0.75f));
  CHECK(load_u16_le(q.data()) == 0);
  CHECK(read_half(q.data() + 2) == 0.75f);
  CHECK(q51(0) == 0);
}

// Round-trip bounds, derived from the rules in quantize.h. With d the float scale, dh = fp16(d)
// (and mh = fp16(min)), the dequantized value is (q - z) * dh (+ mh), so
//   Q8_0  |err| <= 0.5 d + 127 |dh - d|                  (|q| <= 127; rounding to nearest)
//   Q4_0  |err| <= 0.5 |d| + 8 |dh - d|, except where x*id > 7.5 (the opposite end of the
//         range, clamped from 16 to 15): there |err| <= |d| + 8 |dh - d|
//   Q4_1  |err| <= 0.5 d + 15 |dh - d| + |mh - min|
// plus a float-rounding slack of 1e-4 d (x*id and 1/d are rounded once each) and 1e-6 of the
// block's largest magnitude (the dequantizing multiply and add).
TEST_CASE("dequantize(quantize(x)) stays within the derived error bounds", "[cpu]") {
  std::mt19937 rng(7);
  int checked = 0;
  for (float scale : {1e-3f, 0.02f, 1.0f, 50.0f, 3000.0f}) {
    for (int rep = 0; rep < 40; ++rep) {
      const float offset = rep % 4 == 3 ? 3.0f * scale : 0.0f;
      const auto x = random_row(rng, 256, scale, offset);
      for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1}) {
        const auto q = quantize(type, x);
        const auto y = dequantize(type, q, x.size());
        const size_t bytes = ggml_traits(type).type_size;
        for (size_t b = 0; b < x.size() / 32; ++b) {
          const float* xb = x.data() + 32 * b;
          const uint8_t* qb = q.data() + bytes * b;
          float amax = 0.0f, max = 0.0f, min = xb[0], hi = xb[0];
          for (int j = 0; j < 32; ++j) {
            if (amax < std::fabs(xb[j])) amax = std::fabs(xb[j]), max = xb[j];
            min = std::fmin(min, xb[j]);
            hi = std::fmax(hi, xb[j]);
          }
          float d = 0.0f, dh = read_half(qb), base = 0.0f, extra = 0.0f;
          if (type == GgmlType::Q8_0) d = amax / 127.0f, base = 127.0f;
          if (type == GgmlType::Q4_0) d = max / -8.0f, base = 8.0f;
          if (type == GgmlType::Q4_1) {
            d = (hi - min) / 15.0f, base = 15.0f;
            extra = std::fabs(read_half(qb + 2) - min);
          }
          for (int j = 0; j < 32; ++j) {
            const float err = std::fabs(y[32 * b + static_cast<size_t>(j)] - xb[j]);
            const bool clamped = type == GgmlType::Q4_0 && xb[j] / d > 7.5f;
            const float bound = (clamped ? 1.0f : 0.5f + 1e-4f) * std::fabs(d) +
                                base * std::fabs(dh - d) + extra + 1e-6f * amax;
            INFO(ggml_type_name(type) << " scale " << scale << " block " << b << " element " << j
                                      << ": x " << xb[j] << " err " << err << " bound " << bound);
            REQUIRE(err <= bound);
            ++checked;
          }
        }
      }
    }
  }
  CHECK(checked == 5 * 40 * 3 * 256);
}

// Q8_0: requantizing the dequantized row gives the same bytes whenever dh = fp16(d) is finite
// and nonzero. Why: the largest |q| is 127, so the new amax is 127 * dh (exact: an 11-bit times
// a 7-bit significand), the new d is exactly dh, and (q * dh) * fl(1/dh) = q (1 + e) with
// |e| <= 2^-23 rounds back to q. The same argument holds for Q4_0 (the new max is -8 dh).
// Q4_1 has no such proof: y = q * dh + mh is rounded to float, so (y - min) / d is not exactly
// q. It held for every random row we tried with offsets up to 3e4 times the spread, but it is
// not true in general: the block below (range 2^-13 around 48.7, so d is an fp16 subnormal and
// y rounds to float ulps of 48.7) changes on requantization.
TEST_CASE("quantize -> dequantize -> quantize is a fixed point for Q8_0 and Q4_0", "[cpu]") {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> log_scale(-5.0f, 5.0f);
  int rows = 0, q41_rows = 0, q41_changed = 0;
  for (int rep = 0; rep < 2000; ++rep) {
    const float scale = std::pow(10.0f, log_scale(rng));
    const auto x = random_row(rng, 128, scale, rep % 3 == 0 ? scale : 0.0f);
    for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0}) {
      const auto q = quantize(type, x);
      bool scale_ok = true;
      for (size_t b = 0; b < q.size(); b += ggml_traits(type).type_size) {
        const float dh = read_half(q.data() + b);
        scale_ok = scale_ok && dh != 0.0f && std::isfinite(dh);
      }
      if (!scale_ok) continue;  // d underflowed or overflowed fp16: outside the claim
      const auto again = quantize(type, dequantize(type, q, x.size()));
      INFO(ggml_type_name(type) << " row " << rep << " scale " << scale);
      REQUIRE(again == q);
      ++rows;
    }
    const auto q41 = quantize(GgmlType::Q4_1, x);
    const auto y41 = dequantize(GgmlType::Q4_1, q41, x.size());
    if (!std::all_of(y41.begin(), y41.end(), [](float v) { return std::isfinite(v); })) continue;
    ++q41_rows;
    if (quantize(GgmlType::Q4_1, y41) != q41) ++q41_changed;
  }
  CHECK(rows > 3000);
  WARN("Q4_1 random rows that are not a fixed point: " << q41_changed << " of " << q41_rows);

  const std::vector<float> x = {0x1.85eacap+5f, 0x1.85eac4p+5f, 0x1.85eadep+5f, 0x1.85eacep+5f,
                                0x1.85eabep+5f, 0x1.85eac4p+5f, 0x1.85eaccp+5f, 0x1.85eac2p+5f,
                                0x1.85eacap+5f, 0x1.85eac6p+5f, 0x1.85ead4p+5f, 0x1.85eacap+5f,
                                0x1.85eaccp+5f, 0x1.85eacap+5f, 0x1.85eadp+5f,  0x1.85eaccp+5f,
                                0x1.85ead4p+5f, 0x1.85eacap+5f, 0x1.85eac8p+5f, 0x1.85eac6p+5f,
                                0x1.85ead8p+5f, 0x1.85ead8p+5f, 0x1.85eacep+5f, 0x1.85eaccp+5f,
                                0x1.85eaccp+5f, 0x1.85ead4p+5f, 0x1.85eacep+5f, 0x1.85ead8p+5f,
                                0x1.85eadp+5f,  0x1.85eadp+5f,  0x1.85eac8p+5f, 0x1.85eac8p+5f};
  const auto q41 = quantize(GgmlType::Q4_1, x);
  const auto q41_again = quantize(GgmlType::Q4_1, dequantize(GgmlType::Q4_1, q41, 32));
  CHECK(q41_again != q41);
  // Q8_0 and Q4_0 stay fixed on it.
  for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0}) {
    const auto q = quantize(type, x);
    CHECK(quantize(type, dequantize(type, q, 32)) == q);
  }
}

TEST_CASE("NaN or Inf input is an error naming the tensor, row and column", "[cpu]") {
  std::vector<float> x(4 * 64, 0.25f);
  std::vector<uint8_t> out(4 * quantized_size(GgmlType::Q4_0, 64), 0xCD);
  x[2 * 64 + 37] = std::numeric_limits<float>::quiet_NaN();
  x[3 * 64 + 1] = std::numeric_limits<float>::infinity();  // later: not the one reported
  for (GgmlType type : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_1, GgmlType::F16,
                        GgmlType::BF16, GgmlType::F32}) {
    std::vector<uint8_t> dst(4 * quantized_size(type, 64), 0xCD);
    CHECK_THROWS_WITH(quantize_tensor(type, "blk.3.attn_q.weight", x.data(), dst.data(), 4, 64),
                      Catch::Contains("tensor 'blk.3.attn_q.weight'") &&
                          Catch::Contains("nan at row 2, column 37"));
    // Nothing written: the whole tensor is checked first.
    CHECK(std::all_of(dst.begin(), dst.end(), [](uint8_t v) { return v == 0xCD; }));
  }
  x[2 * 64 + 37] = 1.0f;
  x[3 * 64 + 1] = -std::numeric_limits<float>::infinity();
  CHECK_THROWS_WITH(quantize_tensor(GgmlType::Q8_0, "output.weight", x.data(), out.data(), 4, 64),
                    Catch::Contains("'output.weight' has -inf at row 3, column 1"));
  CHECK_THROWS_WITH(quantize_row(GgmlType::Q8_0, x.data() + 3 * 64, out.data(), 64),
                    Catch::Contains("element 1 is -inf"));
  x[3 * 64 + 1] = 0.0f;
  CHECK_NOTHROW(quantize_tensor(GgmlType::Q4_0, "ok", x.data(), out.data(), 4, 64));
}

TEST_CASE("quantize_tensor equals quantize_row per row", "[cpu]") {
  std::mt19937 rng(3);
  const auto x = random_row(rng, 3 * 96, 0.1f);
  for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::BF16}) {
    const size_t row_bytes = quantized_size(type, 96);
    std::vector<uint8_t> whole(3 * row_bytes), rows(3 * row_bytes);
    quantize_tensor(type, "t", x.data(), whole.data(), 3, 96);
    for (size_t r = 0; r < 3; ++r)
      quantize_row(type, x.data() + 96 * r, rows.data() + row_bytes * r, 96);
    CHECK(whole == rows);
  }
}

TEST_CASE("quantize rejects partial blocks and unsupported types", "[cpu]") {
  std::vector<float> x(64, 1.0f);
  std::vector<uint8_t> out(256);
  for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0,
                        GgmlType::Q5_1}) {
    CHECK_THROWS_WITH(quantize_row(type, x.data(), out.data(), 33),
                      Catch::Contains("33 elements is not a whole number"));
    CHECK_THROWS_WITH(quantize_tensor(type, "blk.0.ffn_down.weight", x.data(), out.data(), 2, 48),
                      Catch::Contains("48 elements is not a whole number"));
  }
  CHECK_THROWS_AS(quantize_row(GgmlType::Q4_0, x.data(), out.data(), -32), Error);
  CHECK_THROWS_WITH(quantize_row(GgmlType::IQ2_XXS, x.data(), out.data(), 256),
                    Catch::Contains("IQ2_XXS is not supported"));
  CHECK_THROWS_WITH(quantize_row(GgmlType::Q4_K, x.data(), out.data(), 64),
                    Catch::Contains("64 elements is not a whole number of Q4_K blocks of 256"));
  CHECK_THROWS_AS(quantize_tensor(GgmlType::Q8_0, "t", x.data(), out.data(), -1, 32), Error);
  CHECK_NOTHROW(quantize_row(GgmlType::F16, x.data(), out.data(), 33));  // plain types: any n
  CHECK(quantized_size(GgmlType::Q4_1, 64) == 40);
  CHECK(quantized_size(GgmlType::BF16, 3) == 6);
  CHECK(can_quantize(GgmlType::F32));
  CHECK(can_quantize(GgmlType::Q5_0));
  CHECK(can_quantize(GgmlType::IQ4_NL));
  CHECK_FALSE(can_quantize(GgmlType::IQ2_XXS));
  quantize_row(GgmlType::Q8_0, nullptr, nullptr, 0);  // empty row: nothing to do
}
