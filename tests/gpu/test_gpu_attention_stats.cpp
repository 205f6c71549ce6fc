// attention_with_stats on the CUDA backend: its `out` bit-identical to the GPU's attention(),
// and out and the per-(token, head) statistics against the CPU reference, over GQA shapes, head
// sizes off the warp size, block sizes that are not powers of two, f32 and f16 pools, with NaN,
// +inf and -inf injected into K so that some scores are NaN or infinite.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "backend_pair.h"
#include "paged_layout.h"

using namespace llmctl;
using llmctl::test::fetch;
using llmctl::test::fill;
using llmctl::test::Layout;
using llmctl::test::make_f32;
using llmctl::test::make_layout;
using llmctl::test::PagedSetup;
using llmctl::test::random_floats;
using llmctl::test::same_bits;

namespace {

// Both NaN, or within `tol` (both infinite: equal).
bool close(float got, float want, double tol) {
  if (std::isnan(got) || std::isnan(want)) return std::isnan(got) && std::isnan(want);
  if (std::isinf(got) || std::isinf(want)) return got == want;
  return std::fabs(static_cast<double>(got) - static_cast<double>(want)) <= tol;
}

double relative(float want) { return 1e-4 * (1.0 + std::fabs(static_cast<double>(want))); }

// Row of K (in the order kv_store stored them: sequence 0's 1 position, 1's 17, 2's 70) of
// sequence `seq` at position `pos`.
size_t k_row(int seq, int pos) {
  const int starts[] = {0, 1, 18};
  return static_cast<size_t>(starts[seq] + pos);
}

}  // namespace

TEST_CASE("cuda attention_with_stats: out as attention(), stats as the CPU's", "[gpu]") {
  cpu::CpuBackend cpu;
  cuda::CudaBackend gpu(0);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const AttentionShape shapes[] = {{4, 4, 64}, {8, 2, 32}, {6, 3, 100}, {2, 1, 256}, {3, 1, 7}};
  for (const AttentionShape& base : shapes) {
    for (const float cap : {0.0f, 3.0f}) {  // with a soft-cap the raw statistics differ
      AttentionShape sh = base;
      sh.softcap = cap;
      for (const int64_t block_size : {16, 5}) {
        for (const BufferType pool : {BufferType::F32, BufferType::F16}) {
          for (const bool inject : {false, true}) {
            CAPTURE(sh.n_heads, sh.n_kv_heads, sh.head_dim, cap, block_size, buffer_type_name(pool),
                    inject);
            const int64_t kv_dim = sh.n_kv_heads * sh.head_dim;
            const Layout l = make_layout(block_size, kv_dim);
            const auto n_rows = l.slots.size();
            auto k = random_floats(n_rows * static_cast<size_t>(kv_dim), 1, -2, 2);
            const auto v = random_floats(n_rows * static_cast<size_t>(kv_dim), 2);
            if (inject) {
              // kv head 0 only: the other heads' statistics stay clean. Sequence 2 position 5: a
              // NaN score; position 10: +-inf (the sign of q's element); sequence 1 position 3:
              // +-inf the other way (element 0 as well in head_dim 7).
              const auto kd = static_cast<size_t>(kv_dim);
              k[k_row(2, 5) * kd + 0] = nan;
              k[k_row(2, 10) * kd + 1 % static_cast<size_t>(sh.head_dim)] = inf;
              k[k_row(1, 3) * kd + 2 % static_cast<size_t>(sh.head_dim)] = -inf;
            }
            const PagedSetup cs = fill(cpu, l, pool, k, v), gs = fill(gpu, l, pool, k, v);
            const auto n_tok = static_cast<int64_t>(l.tok_seq.size());
            const int64_t q_len = n_tok * sh.n_heads * sh.head_dim;
            const int64_t st_len = n_tok * sh.n_heads * kAttnStatFields;
            const auto q = random_floats(static_cast<size_t>(q_len), 3, -2, 2);
            Buffer cq = make_f32(cpu, q), gq = make_f32(gpu, q);
            Buffer co = cpu.alloc(q_len), cst = cpu.alloc(st_len);
            Buffer go = gpu.alloc(q_len), go_plain = gpu.alloc(q_len), gst = gpu.alloc(st_len);
            cpu.attention_with_stats(cq, cs.kv(), n_tok, sh, co, cst);
            gpu.attention_with_stats(gq, gs.kv(), n_tok, sh, go, gst);
            gpu.attention(gq, gs.kv(), n_tok, sh, go_plain);
            const auto g_out = fetch(gpu, go, q_len);
            CHECK(same_bits(g_out, fetch(gpu, go_plain, q_len)));
            // Out: as test_gpu_attention.cpp (1e-4; NaN where the CPU has NaN).
            const auto c_out = fetch(cpu, co, q_len);
            int64_t out_bad = 0;
            for (size_t i = 0; i < c_out.size(); ++i)
              out_bad += close(g_out[i], c_out[i], 1e-4) ? 0 : 1;
            CHECK(out_bad == 0);
            // Stats. Scores are |s| <~ 10 here, computed in other orders (fma on the device):
            // ~1e-6 apart, so max/min within 1e-4; the sums over <= 70 scores (f64 accumulation on
            // both sides of the same f32 scores up to rounding) within 1e-4 relative; the entropy
            // (ln L - T / L in f32 on the device) within 1e-4. Counts exact. A wrong position,
            // head or mask moves these by far more (a score ~1, a count by 1).
            const auto g_st = fetch(gpu, gst, st_len), c_st = fetch(cpu, cst, st_len);
            int64_t n_nan_scores = 0;
            for (int64_t row = 0; row < n_tok * sh.n_heads; ++row) {
              const float* g = g_st.data() + row * kAttnStatFields;
              const float* c = c_st.data() + row * kAttnStatFields;
              CAPTURE(row / sh.n_heads, row % sh.n_heads);
              CHECK(g[kAttnStatCount] == c[kAttnStatCount]);
              CHECK(g[kAttnStatNan] == c[kAttnStatNan]);
              CHECK(g[kAttnStatInf] == c[kAttnStatInf]);
              CHECK(close(g[kAttnStatMax], c[kAttnStatMax], 1e-4));
              CHECK(close(g[kAttnStatMin], c[kAttnStatMin], 1e-4));
              CHECK(close(g[kAttnStatSum], c[kAttnStatSum], relative(c[kAttnStatSum])));
              CHECK(close(g[kAttnStatSumSq], c[kAttnStatSumSq], relative(c[kAttnStatSumSq])));
              CHECK(close(g[kAttnStatEntropy], c[kAttnStatEntropy], 1e-4));
              CHECK(g[kAttnStatRawNonFinite] == c[kAttnStatRawNonFinite]);
              CHECK(close(g[kAttnStatRawMax], c[kAttnStatRawMax], 1e-4));
              CHECK(close(g[kAttnStatRawMin], c[kAttnStatRawMin], 1e-4));
              n_nan_scores += static_cast<int64_t>(c[kAttnStatNan]);
            }
            // The injection reached some scores (token 2 of the layout sits at sequence 2's
            // position 69), and without it there are none.
            CHECK((n_nan_scores > 0) == inject);
          }
        }
      }
    }
  }
}
