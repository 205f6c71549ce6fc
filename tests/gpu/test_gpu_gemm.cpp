// The CUDA backend's weight types and its two matmul modes:
//   * supports_weight_type is exactly F32, F16, BF16, Q8_0, Q4_0, Q4_1, MXFP4 (its kernels);
//     bind_weight refuses the others with an error naming the tensor.
//   * batch_invariant = false (cuBLAS for prefill-sized batches): within the f16-input bound of
//     the CPU reference, for every dtype, with weight tiles (more rows than one tile holds);
//     below the threshold bit-identical to the batch-invariant backend.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "backend/cuda/gemm.h"
#include "backend_pair.h"
#include "core/error.h"

using namespace llmctl;
using llmctl::test::fetch;
using llmctl::test::same_bits;
using llmctl::test::make_f32;
using llmctl::test::make_weight;
using llmctl::test::random_floats;

namespace {

constexpr GgmlType kCudaTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16,
                                   GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1,
                                   GgmlType::MXFP4};

}  // namespace

TEST_CASE("cuda supports exactly the weight types it has kernels for", "[gpu]") {
  cuda::CudaBackend gpu(0);
  for (uint32_t t = 0; t <= 39; ++t) {
    if (!ggml_type_traits(t)) continue;
    const auto type = static_cast<GgmlType>(t);
    const bool want =
        std::find(std::begin(kCudaTypes), std::end(kCudaTypes), type) != std::end(kCudaTypes);
    CAPTURE(ggml_type_name(type));
    CHECK(gpu.supports_weight_type(type) == want);
  }
  // A Q6_K tensor (an engine type on the CPU) is refused by name; its bytes are never read.
  const GgmlTypeTraits q6k = ggml_traits(GgmlType::Q6_K);
  std::vector<uint8_t> bytes(q6k.type_size * 4);
  const WeightView w{"blk.0.ffn_down.weight", GgmlType::Q6_K,
                     static_cast<int64_t>(q6k.block_size) * 2, 2, bytes.data()};
  CHECK_THROWS_WITH(gpu.bind_weight(w),
                    Catch::Contains("blk.0.ffn_down.weight") && Catch::Contains("Q6_K"));
}

TEST_CASE("cuda cuBLAS matmul is within the f16-input bound of the CPU", "[gpu]") {
  cpu::CpuBackend cpu;
  cuda::CudaBackend fast(0, /*batch_invariant=*/false);
  REQUIRE_FALSE(fast.batch_invariant());
  struct Case {
    GgmlType type;
    int64_t d, n, n_tokens;
  };
  std::vector<Case> cases;
  for (const GgmlType t : kCudaTypes)
    for (const int64_t n_tokens : {64, 100, 257}) cases.push_back({t, 300, 800, n_tokens});
  // More rows than one f16 tile (Gemm::kTileElems / n = 8192 rows of 2048): two GEMM calls.
  cases.push_back({GgmlType::Q4_0, 8192 + 100, 2048, 64});
  cases.push_back({GgmlType::F16, 8192 + 100, 2048, 64});
  for (const Case& c : cases) {
    CAPTURE(ggml_type_name(c.type), c.d, c.n, c.n_tokens);
    REQUIRE(cuda::Gemm::worth_it(c.type, c.n_tokens));
    const auto w = make_weight(fast, c.type, c.d, c.n, 5);
    const auto x = random_floats(static_cast<size_t>(c.n_tokens * c.n), 6, -2, 2);
    Buffer cx = make_f32(cpu, x), gx = make_f32(fast, x);
    Buffer co = cpu.alloc(c.n_tokens * c.d), go = fast.alloc(c.n_tokens * c.d);
    cpu.matmul(w.host, cx, c.n_tokens, co);
    fast.matmul(w.gpu, gx, c.n_tokens, go);
    const auto got = fetch(fast, go, c.n_tokens * c.d), want = fetch(cpu, co, c.n_tokens * c.d);
    // Per output: x rounded to f16 (relative 2^-11 per term), F32/BF16 weights rounded to f16
    // too (another 2^-11; block formats and F16 are exact in f16), f32 sums in any order
    // (n 2^-24 each side): bound * sum_i |w_i x_i|, doubled for margin. A wrong tile, row or
    // transpose moves outputs by ~sum |w x| itself.
    const bool w_rounded = c.type == GgmlType::F32 || c.type == GgmlType::BF16;
    const double rel = (w_rounded ? 2.0 : 1.0) * std::ldexp(1.0, -11) +
                       2.0 * static_cast<double>(c.n) * std::ldexp(1.0, -24);
    int64_t bad = 0;
    for (int64_t t = 0; t < c.n_tokens; ++t) {
      for (int64_t r = 0; r < c.d; ++r) {
        double mag = 0;
        for (int64_t i = 0; i < c.n; ++i)
          mag += std::fabs(static_cast<double>(w.values[static_cast<size_t>(r * c.n + i)]) *
                           static_cast<double>(x[static_cast<size_t>(t * c.n + i)]));
        const auto at = static_cast<size_t>(t * c.d + r);
        const double diff = std::fabs(static_cast<double>(got[at]) - static_cast<double>(want[at]));
        if (!(diff <= 2.0 * rel * mag)) ++bad;
      }
    }
    CHECK(bad == 0);
  }
}

TEST_CASE("cuda matmul below the cuBLAS threshold is the batch-invariant matvec", "[gpu]") {
  cuda::CudaBackend exact(0), fast(0, /*batch_invariant=*/false);
  CHECK(exact.batch_invariant());
  const int64_t d = 300, n = 800, n_tokens = 8;
  for (const GgmlType type : kCudaTypes) {
    CAPTURE(ggml_type_name(type));
    REQUIRE_FALSE(cuda::Gemm::worth_it(type, n_tokens));
    const auto we = make_weight(exact, type, d, n, 7), wf = make_weight(fast, type, d, n, 7);
    const auto x = random_floats(static_cast<size_t>(n_tokens * n), 8);
    Buffer ex = make_f32(exact, x), fx = make_f32(fast, x);
    Buffer eo = exact.alloc(n_tokens * d), fo = fast.alloc(n_tokens * d);
    exact.matmul(we.gpu, ex, n_tokens, eo);
    fast.matmul(wf.gpu, fx, n_tokens, fo);
    CHECK(same_bits(fetch(fast, fo, n_tokens * d), fetch(exact, eo, n_tokens * d)));
  }
}
