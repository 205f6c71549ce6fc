// The attention temperature (backend.h attn_temperature, core/rope_math.h): Mistral 3's
// scaling of q after RoPE, 1 + beta ln(1 + floor(pos / length)). The factor against the
// formula as llama.cpp's llm_graph_input_attn_temp and transformers' get_llama_4_attn_scale
// write it, the op on both CPU backends (one multiply per element: the same bits), and the
// seam's checks. The CUDA kernel: tests/gpu/test_gpu_ops.cpp, test_kernel_math.cpp.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_fast_backend.h"
#include "core/error.h"
#include "core/rope_math.h"
#include "support/backend_buffers.h"

using namespace llmctl;
using llmctl::test::make;
using llmctl::test::make_ids;
using llmctl::test::read;

TEST_CASE("attn_temperature: 1 below the length, then 1 + beta ln(1 + floor(pos / length))",
          "[cpu]") {
  for (int64_t pos = 0; pos < 16; ++pos) CHECK(attn_temperature(pos, 0.1, 16) == 1.0f);
  CHECK(attn_temperature(-3, 0.1, 16) == 1.0f);
  // llama.cpp: log(floor(pos / n) + 1) * scale + 1 in double, stored as float.
  for (const int64_t pos : {16, 17, 31, 32, 47, 48, 16383, 16384, 131072, 1000000}) {
    CAPTURE(pos);
    const double want = std::log(std::floor(static_cast<double>(pos) / 16.0) + 1.0) * 0.1 + 1.0;
    CHECK(attn_temperature(pos, 0.1, 16) == static_cast<float>(want));
  }
  CHECK(attn_temperature(16, 0.5, 16) == static_cast<float>(1.0 + 0.5 * std::log(2.0)));
  CHECK(attn_temperature(16384, 0.1, 16384) == Approx(1.0693147).epsilon(1e-7));
}

TEST_CASE("attn_temperature: each row times its position's factor, both CPU backends alike",
          "[cpu]") {
  cpu::CpuBackend ref;
  cpu::CpuFastBackend fast(2);
  const std::vector<int32_t> pos{0, 15, 16, 40, 3};
  const int64_t n_tokens = 5, n_cols = 13;
  std::vector<float> x(static_cast<size_t>(n_tokens * n_cols));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 2.5f;
  std::vector<std::vector<float>> out;
  for (Backend* be : {static_cast<Backend*>(&ref), static_cast<Backend*>(&fast)}) {
    Buffer xb = make(*be, x), pb = make_ids(*be, pos);
    be->attn_temperature(xb, pb, n_tokens, n_cols, 0.5, 16);
    out.push_back(read(*be, xb));
  }
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t i = 0; i < n_cols; ++i) {
      const auto k = static_cast<size_t>(t * n_cols + i);
      CHECK(out[0][k] == x[k] * attn_temperature(pos[static_cast<size_t>(t)], 0.5, 16));
    }
  CHECK(out[0][0] == x[0]);                             // position 0: unchanged
  CHECK(out[0][static_cast<size_t>(3 * n_cols + 1)] ==  // position 40: floor 2
        x[static_cast<size_t>(3 * n_cols + 1)] * static_cast<float>(1.0 + 0.5 * std::log(3.0)));
  CHECK(std::memcmp(out[0].data(), out[1].data(), out[0].size() * sizeof(float)) == 0);
}

TEST_CASE("attn_temperature: the seam refuses a bad length, beta or buffer", "[cpu]") {
  cpu::CpuBackend b;
  Buffer x = b.alloc(8), pos = b.alloc(2, BufferType::I32);
  CHECK_THROWS_AS(b.attn_temperature(x, pos, 2, 4, 0.1, 0), Error);
  CHECK_THROWS_AS(b.attn_temperature(x, pos, 2, 4, std::nan(""), 16), Error);
  CHECK_THROWS_AS(b.attn_temperature(x, pos, 3, 4, 0.1, 16), Error);  // x too small
  CHECK_THROWS_AS(b.attn_temperature(x, x, 2, 4, 0.1, 16), Error);    // positions not I32
  CHECK_NOTHROW(b.attn_temperature(x, pos, 2, 4, 0.1, 16));
}
