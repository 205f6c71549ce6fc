// The compute-peak probe (backend/cpu/compute_probe.h): finite rates inside what any CPU can
// do, in the instruction set asked for. Sanity bounds only: speed is for benchmarks.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>

#include "backend/cpu/compute_probe.h"
#include "core/error.h"

using namespace llmctl::cpu;

namespace {

// Per core and cycle no x86 CPU does more than two 512-bit FMAs (64 flops) or two 512-bit
// dpbusd (256 int8 ops); twice that at 6 GHz bounds the rates from above. A loop the compiler
// folded away, or an ops count 10x too high, lands far above; one spilled to memory or run
// on a single thread of n, far below the lower bound only when badly broken (1 GFLOP/s).
constexpr double kMaxF32PerThread = 2 * 64 * 6.0;    // GFLOP/s
constexpr double kMaxInt8PerThread = 2 * 256 * 6.0;  // GOP/s

void check_sane(const ComputeResult& r, int n_threads) {
  INFO("isa " << r.isa << ", " << n_threads << " threads: f32 " << r.gflop_s_f32_fma
              << " GFLOP/s, int8 " << r.gop_s_int8 << " GOP/s");
  CHECK(r.n_threads == n_threads);
  CHECK(std::isfinite(r.gflop_s_f32_fma));
  CHECK(std::isfinite(r.gop_s_int8));
  CHECK(r.gflop_s_f32_fma > 1.0);
  CHECK(r.gop_s_int8 > 1.0);
  CHECK(r.gflop_s_f32_fma < kMaxF32PerThread * n_threads);
  CHECK(r.gop_s_int8 < kMaxInt8PerThread * n_threads);
}

}  // namespace

TEST_CASE("compute probe: sane f32 FMA and int8 rates in every instruction set the CPU has",
          "[cpu]") {
  check_sane(measure_compute_peak(1, 1, MatmulIsa::Scalar), 1);
  CHECK(std::string(measure_compute_peak(1, 1, MatmulIsa::Scalar).isa) == "scalar");
  for (MatmulIsa isa : {MatmulIsa::Avx2, MatmulIsa::Avx512}) {
    if (isa == MatmulIsa::Avx2 ? !matmul_fast_has_avx2() : !matmul_fast_has_avx512()) {
      CHECK_THROWS_AS(measure_compute_peak(1, 1, isa), llmctl::Error);
      continue;
    }
    const ComputeResult r = measure_compute_peak(1, 1, isa);
    check_sane(r, 1);
    CHECK(std::string(r.isa) == matmul_isa_name(isa));
    // What makes int8 weights worth it: maddubs (AVX2) and dpbusd (VNNI) do more multiply-adds
    // per cycle than FMA does (1.4x and 4x here, 2x and 4x on Intel cores).
    CHECK(r.gop_s_int8 > r.gflop_s_f32_fma);
  }
}

TEST_CASE("compute probe: Auto is the matmul kernels' instruction set, on n threads", "[cpu]") {
  const ComputeResult r = measure_compute_peak(2, 1);
  check_sane(r, 2);
  CHECK(std::string(r.isa) == matmul_isa_name(matmul_fast_auto_isa()));
  CHECK_THROWS_AS(measure_compute_peak(0, 1), llmctl::Error);
}

TEST_CASE("matmul_fast_int8_activations: the peak each dtype's matmul runs at", "[cpu]") {
  using llmctl::GgmlType;
  // f32 FMAs: float weights, and the dequantizing path of the Float precision
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16})
    CHECK_FALSE(matmul_fast_int8_activations(t));
  CHECK_FALSE(matmul_fast_int8_activations(GgmlType::Q4_0, MatmulPrecision::Float));
  CHECK_FALSE(matmul_fast_int8_activations(GgmlType::Q4_K, MatmulPrecision::Float));
  // int8 dot products (matmul_fast.h: the Fast precision's list)
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                     GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::Q2_K, GgmlType::Q3_K,
                     GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::MXFP4})
    CHECK(matmul_fast_int8_activations(t));
}
