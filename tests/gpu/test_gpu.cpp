// GPU parity tests: kernels on the device against the CPU reference. Its own executable: main()
// exits 77 when no GPU is visible, so CTest reports "skipped" on CPU machines, never "passed".
// LLMCTL_REQUIRE_GPU=1 (scripts/gpu-check.sh) turns that skip into a failure.
#define CATCH_CONFIG_RUNNER
#include <cuda_runtime_api.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/cuda/buffer.h"
#include "backend/cuda/get_rows.h"
#include "core/error.h"
#include "gpu_main.h"
#include "kernels/kernels.h"
#include "quant/dequant.h"
#include "random_tables.h"

namespace {

using llmctl::GgmlType;
using llmctl::cuda::DeviceBuffer;

// Tolerance per dtype: the largest |gpu - cpu| allowed. All are exact (0), because
// dequantization is exact in fp32 and both sides round the same single operation:
//   dtype  tol  why
//   F32    0    a copy
//   F16    0    every fp16 value is a float
//   BF16   0    every bf16 value is a float (its top 16 bits)
//   Q8_0   0    q (8 bits) * d (11-bit significand) fits a float's 24 bits exactly
//   Q4_0   0    (q - 8) (4 bits) * d fits exactly
//   Q4_1   0    q * d is exact, so q * d + m rounds once, FMA-contracted or not
//   MXFP4  0    a level (at most 4 bits) times a power of two (the same rounding if subnormal)
struct Tolerance {
  GgmlType type;
  float max_abs_diff;
};
constexpr Tolerance kTolerances[] = {
    {GgmlType::F32, 0.0f},  {GgmlType::F16, 0.0f},  {GgmlType::BF16, 0.0f},
    {GgmlType::Q8_0, 0.0f}, {GgmlType::Q4_0, 0.0f}, {GgmlType::Q4_1, 0.0f},
    {GgmlType::MXFP4, 0.0f},
};

float tolerance(GgmlType type) {
  for (const Tolerance& t : kTolerances)
    if (t.type == type) return t.max_abs_diff;
  FAIL("no tolerance for " << llmctl::ggml_type_name(type));
  return 0.0f;
}

// A table on the device plus its CPU-dequantized copy (n_rows x row_len floats).
struct TestTable {
  DeviceBuffer device;
  std::vector<float> reference;
  llmctl::cuda::DeviceTable view;
};

TestTable make_table(GgmlType type, int64_t n_rows, int64_t row_len, uint64_t seed) {
  const std::vector<uint8_t> bytes = llmctl::test::random_table(type, n_rows, row_len, seed);
  const size_t row_bytes = llmctl::cuda::get_rows_row_bytes(type, row_len);
  TestTable t;
  t.device = DeviceBuffer(bytes.size());
  t.device.upload(bytes.data(), bytes.size());
  t.reference.resize(static_cast<size_t>(n_rows * row_len));
  for (int64_t r = 0; r < n_rows; ++r)
    llmctl::dequantize_row(type, bytes.data() + static_cast<size_t>(r) * row_bytes,
                           t.reference.data() + r * row_len, row_len);
  t.view = {type, t.device.data(), n_rows, row_len};
  return t;
}

std::vector<float> download_floats(const DeviceBuffer& buf) {
  std::vector<float> out(buf.size() / sizeof(float));
  buf.download(out.data(), buf.size());
  return out;
}

// Largest |out[i, j] - reference[ids[i], j]|; NaN when a value is NaN on one side only.
double max_abs_diff(const std::vector<float>& out, const TestTable& t,
                    const std::vector<int32_t>& ids) {
  const int64_t len = t.view.row_len;
  double worst = 0.0;
  for (size_t i = 0; i < ids.size(); ++i) {
    const float* got = out.data() + static_cast<int64_t>(i) * len;
    const float* want = t.reference.data() + static_cast<int64_t>(ids[i]) * len;
    for (int64_t j = 0; j < len; ++j) {
      const double d = std::fabs(static_cast<double>(got[j]) - static_cast<double>(want[j]));
      if (std::isnan(d)) return d;
      if (d > worst) worst = d;
    }
  }
  return worst;
}

}  // namespace

TEST_CASE("get_rows on the GPU equals the CPU reference for every dtype and shape", "[gpu]") {
  const GgmlType type = GENERATE(GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0,
                                 GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::MXFP4);
  const bool blocks = llmctl::ggml_traits(type).block_size == 32;
  // Row lengths off the warp (32), thread-block (256) and per-block (1024 groups) sizes; the
  // block types need multiples of 32, so theirs are off 256 and 1024 only.
  const std::vector<int64_t> row_lens = blocks ? std::vector<int64_t>{32, 96, 800, 1056, 4096, 5152}
                                               : std::vector<int64_t>{1, 7, 33, 100, 1000, 4097};
  const int64_t n_rows = GENERATE(1, 37, 300);
  const int64_t n_ids = GENERATE(1, 3, 257, 1000);
  for (const int64_t row_len : row_lens) {
    CAPTURE(llmctl::ggml_type_name(type), n_rows, row_len, n_ids);
    const uint64_t seed = static_cast<uint64_t>(n_rows * 7919 + row_len * 31 + n_ids);
    const TestTable t = make_table(type, n_rows, row_len, seed);
    const std::vector<int32_t> ids = llmctl::test::random_ids(n_ids, n_rows, seed + 1);
    DeviceBuffer out(static_cast<size_t>(n_ids * row_len) * sizeof(float));
    llmctl::cuda::get_rows(t.view, ids.data(), n_ids, out.as<float>());
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    const double diff = max_abs_diff(download_floats(out), t, ids);
    CHECK(diff <= static_cast<double>(tolerance(type)));
  }
}

TEST_CASE("get_rows rejects an out-of-range id before launching", "[gpu]") {
  const TestTable t = make_table(GgmlType::Q4_0, 10, 64, 7);
  DeviceBuffer out(3 * 64 * sizeof(float));
  const std::vector<float> sentinel(3 * 64, 42.0f);
  out.upload(sentinel.data(), out.size());
  for (const int32_t bad : {10, -1, 1 << 30}) {
    const std::vector<int32_t> ids{0, bad, 9};
    CAPTURE(bad);
    CHECK_THROWS_WITH(llmctl::cuda::get_rows(t.view, ids.data(), 3, out.as<float>()),
                      Catch::Contains("out of range") && Catch::Contains("expected 0 <= id < 10"));
  }
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(download_floats(out) == sentinel);  // nothing ran
}

TEST_CASE("get_rows rejects bad shapes, dtypes and pointers", "[gpu]") {
  TestTable t = make_table(GgmlType::Q8_0, 4, 64, 9);
  DeviceBuffer out(64 * sizeof(float));
  const int32_t id = 0;
  auto with = [&t](GgmlType type, int64_t row_len) {
    llmctl::cuda::DeviceTable v = t.view;
    v.type = type;
    v.row_len = row_len;
    return v;
  };
  CHECK_THROWS_WITH(llmctl::cuda::get_rows(with(GgmlType::Q8_0, 48), &id, 1, out.as<float>()),
                    Catch::Contains("multiple of 32") && Catch::Contains("got 48"));
  CHECK_THROWS_WITH(llmctl::cuda::get_rows(with(GgmlType::Q5_K, 256), &id, 1, out.as<float>()),
                    Catch::Contains("got Q5_K"));
  std::vector<float> host_out(64);
  CHECK_THROWS_WITH(llmctl::cuda::get_rows(t.view, &id, 1, host_out.data()),
                    Catch::Contains("device memory"));
  CHECK_THROWS_WITH(llmctl::cuda::get_rows(t.view, &id, 1, out.as<float>() + 1),
                    Catch::Contains("16-byte aligned"));
  CHECK_NOTHROW(llmctl::cuda::get_rows(t.view, nullptr, 0, out.as<float>()));
}

TEST_CASE("the launcher writes a NaN row for an id that slipped past the checks", "[gpu]") {
  // The kernel's last line of defence (kernels/kernels.h): never read outside the table.
  const TestTable t = make_table(GgmlType::F16, 5, 40, 11);
  const std::vector<int32_t> ids{4, 5, -7, 0};
  DeviceBuffer d_ids(ids.size() * sizeof(int32_t));
  d_ids.upload(ids.data(), d_ids.size());
  DeviceBuffer out(ids.size() * 40 * sizeof(float));
  llmctl::cuda::launch_get_rows_f16_f32(t.device.as<uint16_t>(), 5, 40, d_ids.as<int32_t>(), 4,
                                        out.as<float>(), nullptr);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  const std::vector<float> got = download_floats(out);
  for (size_t j = 0; j < 40; ++j) {
    CHECK(got[j] == t.reference[4 * 40 + j]);
    CHECK(std::isnan(got[40 + j]));
    CHECK(std::isnan(got[80 + j]));
    CHECK(got[120 + j] == t.reference[j]);
  }
}

int main(int argc, char** argv) { return llmctl::test::run_gpu_tests(argc, argv, "test_gpu"); }
