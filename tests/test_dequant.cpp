// Reference dequantization and fp16/bf16 conversions against golden values from gguf-py.
// The fixture tests/fixtures/dequant_golden.txt is regenerated with
//     python3 tools/gen_dequant_fixture.py > tests/fixtures/dequant_golden.txt
// (needs `pip install gguf numpy`).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "core/error.h"
#include "core/fp16.h"
#include "quant/dequant.h"
#include "support/fixtures.h"
#include "support/golden_text.h"

using namespace llmctl;

namespace {

struct Case {
  std::string kind;
  int64_t n = 0;
  std::vector<uint8_t> in, out;
};

using test::unhex;

std::vector<Case> load_cases(const char* file = "dequant_golden.txt") {
  std::ifstream in(llmctl::test::fixture_path(file));
  REQUIRE(in);
  std::vector<Case> cases;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ss(line);
    Case c;
    std::string in_hex, out_hex;
    ss >> c.kind >> c.n >> in_hex >> out_hex;
    REQUIRE(ss);
    c.in = unhex(in_hex);
    c.out = unhex(out_hex);
    cases.push_back(std::move(c));
  }
  return cases;
}

template <class T>
T load(const std::vector<uint8_t>& v, size_t i) {
  T x;
  std::memcpy(&x, v.data() + i * sizeof x, sizeof x);
  return x;
}

// Same float bits, except that any NaN matches any NaN (payloads are not part of the contract).
bool same_float(float got, float want) {
  if (std::isnan(want)) return std::isnan(got);
  return f32_to_bits(got) == f32_to_bits(want);
}

// Decodes every block-type case of a golden file and compares bit for bit; returns the number
// of cases per type (conversion cases are skipped).
std::map<std::string, int> check_golden_blocks(const char* file) {
  std::map<std::string, int> seen;
  for (const Case& c : load_cases(file)) {
    const auto type = ggml_type_from_name(c.kind);
    if (!type) continue;  // conversion cases, tested below
    REQUIRE(can_dequantize(*type));
    ++seen[c.kind];
    REQUIRE(c.out.size() == static_cast<size_t>(c.n) * 4);
    std::vector<float> got(static_cast<size_t>(c.n), -12345.0f);
    dequantize_row(*type, c.in.data(), got.data(), c.n);
    for (size_t i = 0; i < got.size(); ++i) {
      const float want = load<float>(c.out, i);
      INFO(c.kind << " input " << fmt::format("{:02x}", fmt::join(c.in, "")) << " element " << i
                  << ": got " << got[i] << ", want " << want);
      REQUIRE(same_float(got[i], want));
    }
  }
  return seen;
}

}  // namespace

TEST_CASE("dequantize_row matches gguf-py bit for bit", "[cpu][golden]") {
  auto seen = check_golden_blocks("dequant_golden.txt");
  CHECK(seen["Q8_0"] >= 50);
  CHECK(seen["Q4_0"] >= 50);
  CHECK(seen["Q4_1"] >= 50);
  CHECK(seen["F16"] == 1);
  CHECK(seen["BF16"] == 1);
}

// Q5_0, Q5_1, the k-quants and the IQ4 types: random bytes in every field
// (tools/gen_dequant_k_fixture.py), decoded by gguf-py. A wrong bit position in qh or hmask, a
// swapped nibble, a misread 6-bit scale or a wrong table level changes most outputs.
TEST_CASE("dequantize_row of Q5_0, Q5_1, Q2_K ... Q6_K, IQ4_NL, IQ4_XS matches gguf-py bit for bit",
          "[cpu][golden]") {
  auto seen = check_golden_blocks("dequant_golden_k.txt");
  for (const char* t : {"Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS"})
    CHECK(seen[t] == 35);
}

TEST_CASE("float to fp16 and bf16 round to nearest even like numpy and gguf-py", "[cpu][golden]") {
  int checked = 0;
  for (const Case& c : load_cases()) {
    if (c.kind != "F32_TO_F16" && c.kind != "F32_TO_BF16") continue;
    for (size_t i = 0; i < static_cast<size_t>(c.n); ++i) {
      const float x = bits_to_f32(load<uint32_t>(c.in, i));
      const uint16_t want = load<uint16_t>(c.out, i);
      const uint16_t got = c.kind == "F32_TO_F16" ? f32_to_fp16(x) : f32_to_bf16(x);
      INFO(c.kind << fmt::format(" input {:08x}: got {:04x}, want {:04x}", f32_to_bits(x), got,
                                 want));
      if (std::isnan(x)) {
        // Both must be NaN; the quiet bit pattern may differ between implementations.
        CHECK(std::isnan(c.kind == "F32_TO_F16" ? fp16_to_f32(got) : bf16_to_f32(got)));
      } else {
        CHECK(got == want);
      }
      ++checked;
    }
  }
  CHECK(checked > 100);
}

TEST_CASE("fp16 round trip is exact for all 65536 halves", "[cpu]") {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = fp16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      CHECK(std::isnan(fp16_to_f32(f32_to_fp16(f))));
      continue;
    }
    INFO(fmt::format("half {:04x}", h));
    REQUIRE(f32_to_fp16(f) == h);
    REQUIRE(f32_to_bf16(bf16_to_f32(static_cast<uint16_t>(h))) == h);
  }
  CHECK(fp16_to_f32(0x0001) == std::ldexp(1.0f, -24));
  CHECK(fp16_to_f32(0x7bff) == 65504.0f);
  CHECK(f32_to_fp16(65520.0f) == 0x7c00);               // rounds up to inf
  CHECK(f32_to_fp16(std::ldexp(1.0f, -25)) == 0x0000);  // tie to even: 0
  CHECK(f32_to_fp16(std::ldexp(1.5f, -25)) == 0x0001);
}

TEST_CASE("hand-checked blocks: nibble order and formulas", "[cpu]") {
  // Q4_0: d = 2 (0x4000); byte j holds element j (low) and j + 16 (high).
  uint8_t q4[18] = {0x00, 0x40};
  q4[2] = 0x9F;  // element 0: 15 -> (15-8)*2 = 14; element 16: 9 -> 2
  float out[32];
  dequantize_row(GgmlType::Q4_0, q4, out, 32);
  CHECK(out[0] == 14.0f);
  CHECK(out[16] == 2.0f);
  CHECK(out[1] == -16.0f);  // nibble 0 -> (0-8)*2
  // Q4_1: d = 0.5 (0x3800), m = -1 (0xBC00): x = q*0.5 - 1.
  uint8_t q41[20] = {0x00, 0x38, 0x00, 0xBC};
  q41[4] = 0xF1;
  dequantize_row(GgmlType::Q4_1, q41, out, 32);
  CHECK(out[0] == -0.5f);
  CHECK(out[16] == 6.5f);
  // Q8_0: d = -0.5, qs = -128, 127.
  uint8_t q8[34] = {0x00, 0xB8, 0x80, 0x7F};
  dequantize_row(GgmlType::Q8_0, q8, out, 32);
  CHECK(out[0] == 64.0f);
  CHECK(out[1] == -63.5f);
  CHECK(out[2] == 0.0f);
  // F32 copies; zero elements do nothing.
  const float f[2] = {1.5f, -2.0f};
  dequantize_row(GgmlType::F32, f, out, 2);
  CHECK(out[1] == -2.0f);
  dequantize_row(GgmlType::Q4_0, nullptr, out, 0);
}

TEST_CASE("dequantize_row rejects unsupported types and partial blocks", "[cpu]") {
  float out[64];
  const uint8_t zeros[256] = {};
  CHECK_THROWS_AS(dequantize_row(GgmlType::IQ3_S, zeros, out, 256), Error);
  CHECK_THROWS_WITH(dequantize_row(GgmlType::IQ2_XXS, zeros, out, 256),
                    Catch::Contains("IQ2_XXS is not supported"));
  CHECK_THROWS_WITH(dequantize_row(GgmlType::Q4_K, zeros, out, 32),
                    Catch::Contains("not a whole number"));
  CHECK_THROWS_WITH(dequantize_row(GgmlType::Q4_0, zeros, out, 33),
                    Catch::Contains("not a whole number"));
  CHECK_THROWS_AS(dequantize_row(GgmlType::F16, zeros, out, -1), Error);
  CHECK(can_dequantize(GgmlType::BF16));
  CHECK_FALSE(can_dequantize(GgmlType::IQ2_XXS));
}
