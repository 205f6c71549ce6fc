// top_k on the CUDA backend against the CPU reference (CpuBackend::top_k_impl, a partial_sort
// with the contract's order): ids exactly and values bit for bit, over row lengths off the warp
// and block sizes, k = 1 (argmax), k around the warp size, k above the shared-memory limit
// (kTopKSharedKeys, sorted in global scratch) and k = n_cols; rows with many ties, NaN, +-inf
// and both zeros. find_nan_inf (sampling from candidates needs it) against the host scan.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "backend_pair.h"

using namespace llmctl;
using llmctl::test::fetch;
using llmctl::test::fetch_i32;
using llmctl::test::same_bits;
using llmctl::test::make_f32;

namespace {

// Values on a coarse grid (many exact ties), with NaN, +-inf, +0 and -0 sprinkled in.
std::vector<float> tricky_logits(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> level(-20, 20), what(0, 99);
  std::vector<float> v(n);
  for (float& x : v) {
    const int w = what(rng);
    if (w < 3)
      x = std::numeric_limits<float>::quiet_NaN();
    else if (w < 5)
      x = std::numeric_limits<float>::infinity();
    else if (w < 7)
      x = -std::numeric_limits<float>::infinity();
    else if (w < 10)
      x = w % 2 == 0 ? 0.0f : -0.0f;
    else
      x = static_cast<float>(level(rng)) * 0.25f;
  }
  return v;
}

void compare(cpu::CpuBackend& cpu, cuda::CudaBackend& gpu, const std::vector<float>& logits,
             int64_t n_rows, int64_t n_cols, int64_t k) {
  CAPTURE(n_rows, n_cols, k);
  Buffer cl = make_f32(cpu, logits), gl = make_f32(gpu, logits);
  Buffer ci = cpu.alloc(n_rows * k, BufferType::I32), cv = cpu.alloc(n_rows * k);
  Buffer gi = gpu.alloc(n_rows * k, BufferType::I32), gv = gpu.alloc(n_rows * k);
  cpu.top_k(cl, n_rows, n_cols, k, ci, cv);
  gpu.top_k(gl, n_rows, n_cols, k, gi, gv);
  CHECK(fetch_i32(gpu, gi, n_rows * k) == fetch_i32(cpu, ci, n_rows * k));
  CHECK(same_bits(fetch(gpu, gv, n_rows * k), fetch(cpu, cv, n_rows * k)));
}

}  // namespace

TEST_CASE("cuda top_k equals the CPU: ties, NaN, infinities, zeros, every k regime", "[gpu]") {
  cpu::CpuBackend cpu;
  cuda::CudaBackend gpu(0);
  for (const int64_t n_cols : {1, 7, 33, 257, 1000, 32000, 50257}) {
    for (const int64_t n_rows : {1, 3}) {
      const auto logits = tricky_logits(static_cast<size_t>(n_rows * n_cols),
                                        static_cast<uint64_t>(n_cols * 10 + n_rows));
      for (const int64_t k : {int64_t{1}, int64_t{2}, int64_t{5}, int64_t{32}, int64_t{33},
                              int64_t{100}, int64_t{2049}, n_cols}) {
        if (k > n_cols) continue;
        compare(cpu, gpu, logits, n_rows, n_cols, k);
      }
    }
  }
}

TEST_CASE("cuda top_k on degenerate rows: all NaN, all equal, one number among NaNs", "[gpu]") {
  cpu::CpuBackend cpu;
  cuda::CudaBackend gpu(0);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const int64_t n = 300;
  std::vector<float> rows(static_cast<size_t>(3 * n), nan);  // row 0: all NaN
  std::fill(rows.begin() + n, rows.begin() + 2 * n, 1.5f);   // row 1: all equal
  rows[static_cast<size_t>(2 * n + 299)] = -1e30f;           // row 2: one number, last
  for (const int64_t k : {1, 4, 300}) compare(cpu, gpu, rows, 3, n, k);
}

TEST_CASE("cuda top_k argmax on a 128k vocabulary row per token of a batch", "[gpu]") {
  cpu::CpuBackend cpu;
  cuda::CudaBackend gpu(0);
  const int64_t n_cols = 128256, n_rows = 5;
  auto logits = llmctl::test::random_floats(static_cast<size_t>(n_rows * n_cols), 9, -30, 30);
  logits[static_cast<size_t>(n_cols + 77)] = 40.0f;  // row 1: a clear winner
  logits[static_cast<size_t>(2 * n_cols + 5)] = 40.0f;
  logits[static_cast<size_t>(2 * n_cols + 4)] = 40.0f;  // row 2: a tie, id 4 wins
  for (const int64_t k : {1, 40}) compare(cpu, gpu, logits, n_rows, n_cols, k);
}

TEST_CASE("cuda find_nan_inf equals the host scan: NaN and +inf anywhere, none, all", "[gpu]") {
  cpu::CpuBackend cpu;
  cuda::CudaBackend gpu(0);
  for (const int64_t n_cols : {1, 31, 257, 32000, 128256}) {
    const int64_t n_rows = 4;
    auto logits =
        tricky_logits(static_cast<size_t>(n_rows * n_cols), static_cast<uint64_t>(n_cols));
    // Row 0 as it comes (NaN and +inf sprinkled in), row 1 clean, row 2 only its last entry
    // bad, row 3 entirely NaN.
    const auto row = [&](int64_t r) { return logits.begin() + r * n_cols; };
    std::fill(row(1), row(2), 0.5f);
    std::fill(row(2), row(3), -1.0f);
    logits[static_cast<size_t>(3 * n_cols - 1)] = std::numeric_limits<float>::infinity();
    std::fill(row(3), logits.end(), std::numeric_limits<float>::quiet_NaN());
    Buffer cl = make_f32(cpu, logits), gl = make_f32(gpu, logits);
    Buffer co = cpu.alloc(2 * n_rows, BufferType::I32), go = gpu.alloc(2 * n_rows, BufferType::I32);
    cpu.find_nan_inf(cl, n_rows, n_cols, co);
    gpu.find_nan_inf(gl, n_rows, n_cols, go);
    CAPTURE(n_cols);
    const std::vector<int32_t> want = fetch_i32(cpu, co, 2 * n_rows);
    CHECK(fetch_i32(gpu, go, 2 * n_rows) == want);
    CHECK(want[2] == -1);
    CHECK(want[3] == -1);
    CHECK(want[5] == static_cast<int32_t>(n_cols - 1));
    CHECK(want[6] == 0);
  }
}
