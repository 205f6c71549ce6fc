// MXFP4 (ggml type 39): dequantization and quantization against golden values from gguf-py
// and ggml's C (tests/fixtures/mxfp4_golden.txt, tools/gen_mxfp4_fixture.py), bit for bit.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/fp16.h"
#include "quant/dequant.h"
#include "quant/quantize.h"
#include "support/golden_text.h"

using namespace llmctl;

namespace {

using test::hex;
using test::unhex;

struct Golden {
  std::string kind, name;  // "MXFP4" (dequantization) or "QUANT" with the row's name
  int64_t n = 0;
  std::vector<uint8_t> in, out;
};

std::vector<Golden> load_golden() {
  std::vector<Golden> cases;
  for (const std::string& line : test::golden_lines("mxfp4_golden.txt")) {
    std::istringstream ss(line);
    Golden g;
    std::string a, b;
    ss >> g.kind;
    if (g.kind == "QUANT") ss >> g.name;
    ss >> g.n >> a >> b;
    REQUIRE(ss);
    g.in = unhex(a);
    g.out = unhex(b);
    cases.push_back(std::move(g));
  }
  return cases;
}

std::vector<float> floats(const std::vector<uint8_t>& bytes) {
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), bytes.size());
  return v;
}

}  // namespace

TEST_CASE("MXFP4 dequantize_row matches gguf-py and ggml bit for bit", "[cpu][golden]") {
  int n_cases = 0;
  bool saw_scale[256] = {};
  for (const Golden& g : load_golden()) {
    if (g.kind != "MXFP4") continue;
    ++n_cases;
    REQUIRE(g.in.size() == static_cast<size_t>(g.n / 32 * 17));
    for (size_t b = 0; b < g.in.size(); b += 17) saw_scale[g.in[b]] = true;
    const std::vector<float> want = floats(g.out);
    std::vector<float> got(static_cast<size_t>(g.n), -12345.0f);
    dequantize_row(GgmlType::MXFP4, g.in.data(), got.data(), g.n);
    for (size_t i = 0; i < got.size(); ++i) {
      INFO("blocks " << hex(g.in) << " element " << i << ": got " << got[i] << ", want "
                     << want[i]);
      REQUIRE(f32_to_bits(got[i]) == f32_to_bits(want[i]));  // +0 for index 8, Inf as ggml
    }
  }
  CHECK(n_cases == 282);
  int scales = 0;
  for (const bool s : saw_scale) scales += s ? 1 : 0;
  CHECK(scales == 256);  // every E8M0 byte, the denormal 0 and 1 and 255 included
}

TEST_CASE("MXFP4 e8m0_half_to_f32 is 2^(e - 128), the ggml denormals at 0 and 1", "[cpu]") {
  CHECK(e8m0_half_to_f32(0) == std::ldexp(1.0f, -128));
  CHECK(e8m0_half_to_f32(1) == std::ldexp(1.0f, -127));
  CHECK(e8m0_half_to_f32(128) == 1.0f);
  CHECK(e8m0_half_to_f32(254) == std::ldexp(1.0f, 126));
  CHECK(e8m0_half_to_f32(255) == std::ldexp(1.0f, 127));
  CHECK(kMxfp4Values[8] == 0);  // E2M1 -0 is an int8 0
}

TEST_CASE("MXFP4 quantize_row writes ggml's quantize_row_mxfp4_ref bytes", "[cpu][golden]") {
  int n_rows = 0;
  for (const Golden& g : load_golden()) {
    if (g.kind != "QUANT") continue;
    ++n_rows;
    const std::vector<float> x = floats(g.in);
    REQUIRE(static_cast<int64_t>(x.size()) == g.n);
    REQUIRE(quantized_size(GgmlType::MXFP4, g.n) == g.out.size());
    std::vector<uint8_t> got(g.out.size(), 0xAA);
    quantize_row(GgmlType::MXFP4, x.data(), got.data(), g.n);
    INFO(g.name);
    CHECK(hex(got) == hex(g.out));
    // An importance matrix changes nothing (ggml's quantize_mxfp4 ignores it).
    std::vector<float> w(x.size());
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 7) + 0.5f;
    std::vector<uint8_t> weighted(g.out.size(), 0x55);
    quantize_rows(GgmlType::MXFP4, x.data(), weighted.data(), 1, g.n, w.data());
    CHECK(weighted == got);
  }
  CHECK(n_rows == 38);
  CHECK_FALSE(uses_importance(GgmlType::MXFP4));
}

TEST_CASE("MXFP4 round trip: every element within half a level step of the block's grid",
          "[cpu]") {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(32 * 64), y(x.size());
  for (float& v : x) v = nd(rng);
  std::vector<uint8_t> q(quantized_size(GgmlType::MXFP4, static_cast<int64_t>(x.size())));
  quantize_row(GgmlType::MXFP4, x.data(), q.data(), static_cast<int64_t>(x.size()));
  dequantize_row(GgmlType::MXFP4, q.data(), y.data(), static_cast<int64_t>(y.size()));
  for (size_t b = 0; b < x.size() / 32; ++b) {
    const float h = e8m0_half_to_f32(q[17 * b]);
    for (size_t j = 0; j < 32; ++j) {
      const float v = x[32 * b + j], r = y[32 * b + j];
      // levels 0..12 h are at most 4 h apart (8 to 12); beyond 12 h the value clips
      const float bound = std::fabs(v) > 12.0f * h ? std::fabs(v) - 12.0f * h : 2.0f * h;
      INFO("block " << b << " element " << j << ": " << v << " -> " << r);
      REQUIRE(std::fabs(v - r) <= bound);
    }
  }
}
