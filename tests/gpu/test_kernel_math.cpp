// The per-element math of the CUDA kernels, run on the CPU: kernels/common.cuh's
// __host__ __device__ block dequantization against the independent reference
// llmctl::dequantize_row (src/quant/dequant.cpp). Needs CUDA headers, not a GPU, so it runs
// wherever the CUDA backend is built; test_gpu checks the same on the device.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/common.cuh"
#include "quant/dequant.h"
#include "random_tables.h"

namespace {

using llmctl::GgmlType;

// Dequantizes one row with Fmt's groups, in the order the kernel's threads would.
template <class Fmt>
std::vector<float> dequantize_with_groups(const uint8_t* row, int64_t row_len) {
  std::vector<float> out(static_cast<size_t>(row_len));
  for (int64_t g = 0; g < row_len / Fmt::kGroup; ++g)
    Fmt::dequantize_group(row, g, out.data() + g * Fmt::kGroup);
  return out;
}

std::vector<float> dequantize_kernel_math(GgmlType type, const uint8_t* row, int64_t row_len) {
  using namespace llmctl::cuda;
  switch (type) {
    case GgmlType::F32:
      return dequantize_with_groups<FormatF32>(row, row_len);
    case GgmlType::F16:
      return dequantize_with_groups<FormatF16>(row, row_len);
    case GgmlType::BF16:
      return dequantize_with_groups<FormatBF16>(row, row_len);
    case GgmlType::Q8_0:
      return dequantize_with_groups<FormatQ8_0>(row, row_len);
    case GgmlType::Q4_0:
      return dequantize_with_groups<FormatQ4_0>(row, row_len);
    case GgmlType::Q4_1:
      return dequantize_with_groups<FormatQ4_1>(row, row_len);
    default:
      FAIL("unsupported type");
      return {};
  }
}

int64_t row_bytes(GgmlType type, int64_t row_len) {
  using namespace llmctl::cuda;
  switch (type) {
    case GgmlType::F32:
      return FormatF32::row_bytes(row_len);
    case GgmlType::F16:
      return FormatF16::row_bytes(row_len);
    case GgmlType::BF16:
      return FormatBF16::row_bytes(row_len);
    case GgmlType::Q8_0:
      return FormatQ8_0::row_bytes(row_len);
    case GgmlType::Q4_0:
      return FormatQ4_0::row_bytes(row_len);
    case GgmlType::Q4_1:
      return FormatQ4_1::row_bytes(row_len);
    default:
      return 0;
  }
}

}  // namespace

TEST_CASE("kernel block dequantization equals the CPU reference exactly", "[cpu][cuda]") {
  const GgmlType type = GENERATE(GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0,
                                 GgmlType::Q4_0, GgmlType::Q4_1);
  const int64_t row_len = GENERATE(32, 64, 96, 1056, 4096);
  const int64_t n_rows = 8;
  CAPTURE(llmctl::ggml_type_name(type), row_len);
  const llmctl::GgmlTypeTraits t = llmctl::ggml_traits(type);
  REQUIRE(row_bytes(type, row_len) == static_cast<int64_t>(row_len / t.block_size * t.type_size));

  const std::vector<uint8_t> table =
      llmctl::test::random_table(type, n_rows, row_len, 1000u + static_cast<uint64_t>(row_len));
  std::vector<float> ref(static_cast<size_t>(row_len));
  for (int64_t r = 0; r < n_rows; ++r) {
    const uint8_t* row = table.data() + r * row_bytes(type, row_len);
    llmctl::dequantize_row(type, row, ref.data(), row_len);
    const std::vector<float> got = dequantize_kernel_math(type, row, row_len);
    for (int64_t j = 0; j < row_len; ++j) {
      const size_t k = static_cast<size_t>(j);
      if (!(got[k] == ref[k])) {  // finite inputs: exact equality is the contract
        CAPTURE(r, j, got[k], ref[k]);
        FAIL("kernel math differs from dequantize_row");
      }
    }
  }
}

TEST_CASE("kernel fp16 and bf16 conversions are exact on special values", "[cpu][cuda]") {
  using llmctl::cuda::bf16_to_float;
  using llmctl::cuda::fp16_to_float;
  CHECK(fp16_to_float(0x3c00) == 1.0f);
  CHECK(fp16_to_float(0xc000) == -2.0f);
  CHECK(fp16_to_float(0x0001) == std::ldexp(1.0f, -24));  // smallest subnormal
  CHECK(fp16_to_float(0x7bff) == 65504.0f);
  CHECK(std::isinf(fp16_to_float(0x7c00)));
  CHECK(std::isnan(fp16_to_float(0x7e00)));
  CHECK(std::signbit(fp16_to_float(0x8000)));
  CHECK(bf16_to_float(0x3f80) == 1.0f);
  CHECK(bf16_to_float(0xc040) == -3.0f);
  CHECK(std::isinf(bf16_to_float(0x7f80)));
}

TEST_CASE("Q4 nibble order: low nibbles are elements 0..15, high nibbles 16..31", "[cpu][cuda]") {
  llmctl::cuda::BlockQ4_0 b{};
  b.d = 0x3c00;  // 1.0
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>((15 - j) << 4 | j);
  uint8_t bytes[sizeof b];
  std::memcpy(bytes, &b, sizeof b);
  const auto out = dequantize_with_groups<llmctl::cuda::FormatQ4_0>(bytes, 32);
  for (int j = 0; j < 16; ++j) {
    CHECK(out[static_cast<size_t>(j)] == static_cast<float>(j - 8));
    CHECK(out[static_cast<size_t>(j + 16)] == static_cast<float>(15 - j - 8));
  }
}
