// The quantized KV pools of the CUDA kernels, run on the CPU: kernels/kv_pool.cuh's Q8_0 / Q4_0
// block quantizer against src/quant's quantize_kv_row (the CPU cache's bytes, themselves
// checked against gguf-py in test_quantize.cpp), and its element loads against dequant.h. Needs
// CUDA headers, not a GPU; test_gpu_backend checks the kernels that call this code.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "kernels/kv_pool.cuh"
#include "quant/dequant.h"
#include "quant/quantize.h"

namespace {

using llmctl::GgmlType;

// Blocks that probe the rules: random at several scales, zeros, a negative largest magnitude,
// equal magnitudes of both signs (Q4_0 takes the first), values on rounding ties, subnormals,
// and blocks whose largest element is tiny enough that 1/d overflows.
std::vector<float> probe_blocks() {
  std::vector<float> x;
  std::mt19937 rng(7);
  std::normal_distribution<float> n01(0.0f, 1.0f);
  for (int b = 0; b < 4000; ++b) {
    const float scale = std::pow(10.0f, static_cast<float>(b % 9) - 4.0f);
    for (int j = 0; j < 32; ++j) x.push_back(n01(rng) * scale);
  }
  const auto push_block = [&x](auto value_of) {
    for (int j = 0; j < 32; ++j) x.push_back(value_of(j));
  };
  push_block([](int) { return 0.0f; });
  push_block([](int j) { return j == 5 ? -3.0f : 0.25f * static_cast<float>(j % 7); });
  push_block([](int j) { return j % 2 == 0 ? 2.0f : -2.0f; });
  push_block([](int j) { return j == 0 ? -2.0f : (j == 1 ? 2.0f : 0.5f); });
  // x / d exactly on .5 for Q8_0 (d = 127 / 127 = 1): ties go away from zero
  push_block([](int j) { return j == 0 ? 127.0f : static_cast<float>(j) - 15.5f; });
  // Q4_0 with max = -8 (d = 1): x + 8.5 on integer + .5 boundaries
  push_block([](int j) { return j == 0 ? -8.0f : static_cast<float>(j % 16) * 0.5f - 4.0f; });
  // x * (1/d) + 8.5 a hair from an integer, where an FMA's single rounding changes the nibble
  // (test_quantize's q4_0_fma_sensitive block, then a family of them around max -7)
  const float fma_case[] = {-7.0f, -3.9375f, -0.4375002086162567f, 0.4374995529651642f};
  push_block([&fma_case](int j) { return j < 4 ? fma_case[j] : 0.0f; });
  for (int b = 0; b < 64; ++b)
    push_block([b](int j) {
      if (j == 0) return -7.0f;
      const float tie = (static_cast<float>((j + b) % 15) - 7.5f) * 0.875f;
      return std::nextafter(tie, (j + b) % 2 == 0 ? 1e9f : -1e9f);
    });
  push_block([](int j) { return std::numeric_limits<float>::denorm_min() * static_cast<float>(j); });
  push_block([](int j) { return 1e-39f * static_cast<float>(j % 5 - 2); });
  return x;
}

std::vector<uint8_t> quantize_with_kernel_math(GgmlType type, const std::vector<float>& x) {
  const size_t bytes = type == GgmlType::Q8_0 ? llmctl::cuda::kKvQ8Bytes : llmctl::cuda::kKvQ4Bytes;
  std::vector<uint8_t> out(x.size() / 32 * bytes);
  for (size_t b = 0; b < x.size() / 32; ++b) {
    if (type == GgmlType::Q8_0)
      llmctl::cuda::kv_quantize_q8_0(x.data() + 32 * b, out.data() + bytes * b);
    else
      llmctl::cuda::kv_quantize_q4_0(x.data() + 32 * b, out.data() + bytes * b);
  }
  return out;
}

}  // namespace

TEST_CASE("cuda KV quantizer: the CPU cache's bytes (Q8_0, Q4_0)", "[cpu][cuda]") {
  const std::vector<float> x = probe_blocks();
  for (const GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0}) {
    CAPTURE(llmctl::ggml_type_name(type));
    const std::vector<uint8_t> ours = quantize_with_kernel_math(type, x);
    std::vector<uint8_t> cpu(ours.size());
    llmctl::quantize_kv_row(type, x.data(), cpu.data(), static_cast<int64_t>(x.size()));
    size_t first_diff = ours.size();
    for (size_t i = 0; i < ours.size() && first_diff == ours.size(); ++i)
      if (ours[i] != cpu[i]) first_diff = i;
    CAPTURE(first_diff);
    CHECK(first_diff == ours.size());
  }
}

TEST_CASE("cuda KV loads: each element as dequant.h gives it (Q8_0, Q4_0)", "[cpu][cuda]") {
  const std::vector<float> x = probe_blocks();
  const auto n = static_cast<int64_t>(x.size());
  for (const GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_0}) {
    CAPTURE(llmctl::ggml_type_name(type));
    std::vector<uint8_t> row(x.size() / 32 * llmctl::ggml_traits(type).type_size);
    llmctl::quantize_kv_row(type, x.data(), row.data(), n);
    std::vector<float> want(x.size());
    llmctl::dequantize_row(type, row.data(), want.data(), n);
    int64_t mismatches = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float got = type == GgmlType::Q8_0 ? llmctl::cuda::kv_q8_0_at(row.data(), i)
                                               : llmctl::cuda::kv_q4_0_at(row.data(), i);
      // bitwise, NaN (an inf d times 0) included
      const bool same = got == want[static_cast<size_t>(i)] ||
                        (std::isnan(got) && std::isnan(want[static_cast<size_t>(i)]));
      if (!same) ++mismatches;
    }
    CHECK(mismatches == 0);
  }
}

TEST_CASE("cuda KV row bytes: kv_dim / 32 blocks, f16 and f32 per element", "[cpu][cuda]") {
  using llmctl::cuda::KvPoolType;
  CHECK(llmctl::cuda::kv_row_bytes(KvPoolType::F32, 256) == 1024);
  CHECK(llmctl::cuda::kv_row_bytes(KvPoolType::F16, 256) == 512);
  CHECK(llmctl::cuda::kv_row_bytes(KvPoolType::Q8_0, 256) == 8 * 34);
  CHECK(llmctl::cuda::kv_row_bytes(KvPoolType::Q4_0, 256) == 8 * 18);
  CHECK(llmctl::buffer_bytes(llmctl::BufferType::Q8_0, 256) == 8 * 34);
  CHECK(llmctl::buffer_bytes(llmctl::BufferType::Q4_0, 256) == 8 * 18);
}
