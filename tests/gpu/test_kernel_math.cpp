// The per-element math of the CUDA kernels, run on the CPU: kernels/common.cuh's
// __host__ __device__ block dequantization against the independent reference
// llmctl::dequantize_row (src/quant/dequant.cpp). Needs CUDA headers, not a GPU, so it runs
// wherever the CUDA backend is built; test_gpu checks the same on the device.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/rope_math.h"
#include "kernels/common.cuh"
#include "kernels/rope_math.cuh"
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
    case GgmlType::MXFP4:
      return dequantize_with_groups<FormatMxfp4>(row, row_len);
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
    case GgmlType::MXFP4:
      return FormatMxfp4::row_bytes(row_len);
    default:
      return 0;
  }
}

}  // namespace

TEST_CASE("kernel block dequantization equals the CPU reference exactly", "[cpu][cuda]") {
  const GgmlType type = GENERATE(GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0,
                                 GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::MXFP4);
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

TEST_CASE("kernels/rope_math.cuh equals core/rope_math.h bit for bit on the CPU", "[cpu][cuda]") {
  // The device copy of the RoPE math must round exactly as the CPU reference does: the same
  // angle (double) and the same rotated floats, for both pairings, partial rotary and scaling.
  const double bases[] = {10000.0, 500000.0, 1000000.0};
  const double scales[] = {1.0, 0.25};
  const int64_t n_rots[] = {2, 64, 100, 128};
  const int64_t positions[] = {0, 1, 17, 4095, 131071, 1000000};
  uint32_t state = 12345u;
  auto next_float = [&state] {  // deterministic values in [-2, 2)
    state = state * 1664525u + 1013904223u;
    return static_cast<float>(state >> 8) / static_cast<float>(1u << 24) * 4.0f - 2.0f;
  };
  int64_t checked = 0;
  for (const double base : bases)
    for (const double scale : scales)
      for (const int64_t n_rot : n_rots)
        for (const int64_t pos : positions)
          for (int64_t pair = 0; pair < n_rot / 2; ++pair) {
            const double want = llmctl::rope_theta(pos, pair, n_rot, base, scale);
            const double got = llmctl::cuda::rope_theta_hd(pos, pair, n_rot, base, scale);
            REQUIRE(std::memcmp(&want, &got, sizeof want) == 0);
            for (const bool neox : {false, true}) {
              int64_t a0 = 0, a1 = 0, b0 = 0, b1 = 0;
              llmctl::rope_pair_index(neox ? llmctl::RopeType::Neox : llmctl::RopeType::Normal,
                                      pair, n_rot, &a0, &a1);
              llmctl::cuda::rope_pair_index_hd(neox, pair, n_rot, &b0, &b1);
              REQUIRE((a0 == b0 && a1 == b1));
            }
            float x0 = next_float(), x1 = next_float();
            float y0 = x0, y1 = x1;
            llmctl::rope_rotate(&x0, &x1, want);
            llmctl::cuda::rope_rotate_hd(&y0, &y1, got);
            REQUIRE(std::memcmp(&x0, &y0, sizeof x0) == 0);
            REQUIRE(std::memcmp(&x1, &y1, sizeof x1) == 0);
            // With a frequency factor and YaRN (ext_factor 1, ramp over pairs [3, 20]) and an
            // attention factor: the same angle and the same scaled rotation.
            for (const double ext : {0.0, 1.0}) {
              const double a = llmctl::rope_angle(pos, pair, n_rot, base, scale, 1.5, ext, 3, 20);
              const double b =
                  llmctl::cuda::rope_angle_hd(pos, pair, n_rot, base, scale, 1.5, ext, 3, 20);
              REQUIRE(std::memcmp(&a, &b, sizeof a) == 0);
              float u0 = x0, u1 = x1, v0 = x0, v1 = x1;
              const double m = 1.0 + 0.1 * std::log(4.0);
              llmctl::rope_rotate_cs(&u0, &u1, static_cast<float>(std::cos(a) * m),
                                     static_cast<float>(std::sin(a) * m));
              llmctl::cuda::rope_rotate_scaled_hd(&v0, &v1, b, m);
              REQUIRE(std::memcmp(&u0, &v0, sizeof u0) == 0);
              REQUIRE(std::memcmp(&u1, &v1, sizeof u1) == 0);
            }
            ++checked;
          }
  CHECK(checked > 1000);
}

TEST_CASE("kernels/rope_math.cuh's attention temperature equals core/rope_math.h's",
          "[cpu][cuda]") {
  for (const double beta : {0.1, 0.5, -0.25})
    for (const int64_t length : {1, 16, 16384})
      for (const int64_t pos : {0, 1, 15, 16, 17, 31, 32, 16383, 16384, 1000000}) {
        const float want = llmctl::attn_temperature(pos, beta, length);
        const float got = llmctl::cuda::attn_temperature_hd(pos, beta, length);
        REQUIRE(std::memcmp(&want, &got, sizeof want) == 0);
      }
}
