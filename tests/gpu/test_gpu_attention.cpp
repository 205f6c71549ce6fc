// Paged KV cache on the CUDA backend against the CPU reference: kv_store into f32, f16, Q8_0
// and Q4_0 pools (K and V of their own types)
// and attention of several sequences over shuffled pool blocks (GQA, head sizes off the warp
// size, block sizes that are not powers of two); then batch invariance, bitwise, on the GPU: a
// token computed alone equals the same token computed in a batch (matmul, rmsnorm, attention).
#include <algorithm>
#include <catch2/catch.hpp>
#include <utility>
#include <vector>

#include "backend_pair.h"
#include "paged_layout.h"

using namespace llmctl;
using llmctl::test::fetch;
using llmctl::test::fill;
using llmctl::test::Layout;
using llmctl::test::make_f32;
using llmctl::test::make_i32;
using llmctl::test::make_layout;
using llmctl::test::make_weight;
using llmctl::test::max_abs_diff;
using llmctl::test::PagedSetup;
using llmctl::test::random_floats;

namespace {

// Paged attention of one layout (make_layout) on both backends, K and V pools of types kt and
// vt filled through kv_store: the largest output difference over the whole batch, and of the
// first token computed alone (the paged kernel; a batch of 16 or more may take the prefill one).
struct AttentionGap {
  double batch = 0, first_alone = 0;
};
AttentionGap attention_gap(cpu::CpuBackend& cpu, cuda::CudaBackend& gpu, const AttentionShape& sh,
                           int64_t block_size, BufferType kt, BufferType vt) {
  const int64_t kv_dim = sh.n_kv_heads * sh.head_dim;
  const Layout l = make_layout(block_size, kv_dim);
  const auto n_rows = l.slots.size();
  const auto k = random_floats(n_rows * static_cast<size_t>(kv_dim), 1, -2, 2);
  const auto v = random_floats(n_rows * static_cast<size_t>(kv_dim), 2);
  const PagedSetup cs = fill(cpu, l, kt, vt, k, v), gs = fill(gpu, l, kt, vt, k, v);
  const auto n_tok = static_cast<int64_t>(l.tok_seq.size());
  const int64_t q_len = n_tok * sh.n_heads * sh.head_dim, head = sh.n_heads * sh.head_dim;
  const auto q = random_floats(static_cast<size_t>(q_len), 3, -2, 2);
  Buffer cq = make_f32(cpu, q), gq = make_f32(gpu, q);
  Buffer co = cpu.alloc(q_len), go = gpu.alloc(q_len), go1 = gpu.alloc(q_len);
  cpu.attention(cq, cs.kv(), n_tok, sh, co);
  gpu.attention(gq, gs.kv(), n_tok, sh, go);
  gpu.attention(gq, gs.kv(), 1, sh, go1);
  const std::vector<float> want = fetch(cpu, co, q_len);
  return {max_abs_diff(fetch(gpu, go, q_len), want),
          max_abs_diff(fetch(gpu, go1, head), std::vector<float>(want.begin(), want.begin() + head))};
}

}  // namespace

TEST_CASE("cuda kv_store and paged attention equal the CPU (several sequences)", "[gpu]") {
  cpu::CpuBackend cpu;
  cuda::CudaBackend gpu(0);
  const AttentionShape shapes[] = {{4, 4, 64}, {8, 2, 32}, {6, 3, 100}, {2, 1, 256}, {3, 1, 7}};
  for (const AttentionShape& sh : shapes) {
    for (const int64_t block_size : {16, 5}) {
      CAPTURE(sh.n_heads, sh.n_kv_heads, sh.head_dim, block_size);
      {  // the f32 pools themselves (only f32 can be downloaded)
        const int64_t kv_dim = sh.n_kv_heads * sh.head_dim;
        const Layout l = make_layout(block_size, kv_dim);
        const auto k = random_floats(l.slots.size() * static_cast<size_t>(kv_dim), 1, -2, 2);
        const auto v = random_floats(l.slots.size() * static_cast<size_t>(kv_dim), 2);
        const PagedSetup cs = fill(cpu, l, BufferType::F32, k, v);
        const PagedSetup gs = fill(gpu, l, BufferType::F32, k, v);
        const int64_t n = cs.k_pool.size();
        CHECK(max_abs_diff(fetch(gpu, gs.k_pool, n), fetch(cpu, cs.k_pool, n)) == 0.0);
        CHECK(max_abs_diff(fetch(gpu, gs.v_pool, n), fetch(cpu, cs.v_pool, n)) == 0.0);
      }
      for (const BufferType pool : {BufferType::F32, BufferType::F16}) {
        CAPTURE(buffer_type_name(pool));
        // Outputs are convex combinations of V rows in [-1, 1]. Scores (up to 256-term dot
        // products, fma on the device) and the online softmax sum in another order than the
        // CPU's two-pass softmax: typically ~1e-6 apart, 1e-4 leaves room for the long heads.
        // f16 pools hold the same f16 values on both sides. A wrong block, head or position
        // moves outputs by ~1e-1.
        const AttentionGap gap = attention_gap(cpu, gpu, sh, block_size, pool, pool);
        CHECK(gap.batch <= 1e-4);
        CHECK(gap.first_alone <= 1e-4);
      }
    }
  }
}

TEST_CASE("cuda quantized KV pools: kv_store and attention equal the CPU (-ctk / -ctv)", "[gpu]") {
  cpu::CpuBackend cpu;
  cuda::CudaBackend gpu(0);
  using Pair = std::pair<BufferType, BufferType>;
  const Pair pairs[] = {{BufferType::Q8_0, BufferType::Q8_0}, {BufferType::Q4_0, BufferType::Q4_0},
                        {BufferType::Q8_0, BufferType::F16},  {BufferType::F16, BufferType::Q4_0},
                        {BufferType::F32, BufferType::F16}};
  const AttentionShape shapes[] = {{4, 4, 64}, {8, 2, 32}, {2, 1, 256}};  // head_dim % 32 == 0
  for (const AttentionShape& sh : shapes)
    for (const Pair& types : pairs) {
      CAPTURE(sh.n_heads, sh.n_kv_heads, sh.head_dim, buffer_type_name(types.first),
              buffer_type_name(types.second));
      // Both sides hold the same blocks (one quantizer rule, kernels/kv_pool.cuh; a different
      // nibble moves an output by about d, ~1e-2) and dequantize them to the same values.
      const AttentionGap gap = attention_gap(cpu, gpu, sh, 16, types.first, types.second);
      CHECK(gap.batch <= 1e-4);
      CHECK(gap.first_alone <= 1e-4);
    }
}

TEST_CASE("cuda ops are batch-invariant: a token alone equals it in a batch, bitwise", "[gpu]") {
  cuda::CudaBackend gpu(0);
  const int64_t n = 800, d = 300, n_batch = 13;
  const auto x = random_floats(static_cast<size_t>(n_batch * n), 11);
  Buffer bx = make_f32(gpu, x);
  Buffer batch_out = gpu.alloc(n_batch * d), alone_out = gpu.alloc(d);
  for (const GgmlType type : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0,
                              GgmlType::Q4_0, GgmlType::Q4_1}) {
    CAPTURE(ggml_type_name(type));
    const auto w = make_weight(gpu, type, d, n, 17);
    gpu.matmul(w.gpu, bx, n_batch, batch_out);
    const auto batched = fetch(gpu, batch_out, n_batch * d);
    for (const int64_t t : {int64_t{0}, int64_t{7}, n_batch - 1}) {
      const std::vector<float> row(x.begin() + t * n, x.begin() + (t + 1) * n);
      Buffer one = make_f32(gpu, row);
      gpu.matmul(w.gpu, one, 1, alone_out);
      const auto alone = fetch(gpu, alone_out, d);
      CHECK(std::equal(alone.begin(), alone.end(), batched.begin() + t * d));
    }
  }

  // Attention: each query token alone against the whole batch of them.
  const AttentionShape sh{8, 2, 64};
  const Layout l = make_layout(16, sh.n_kv_heads * sh.head_dim);
  const auto k = random_floats(l.slots.size() * 128, 4), v = random_floats(l.slots.size() * 128, 5);
  const PagedSetup s = fill(gpu, l, BufferType::F16, k, v);
  const auto n_tok = static_cast<int64_t>(l.tok_seq.size());
  const int64_t head_len = sh.n_heads * sh.head_dim;
  const auto q = random_floats(static_cast<size_t>(n_tok * head_len), 6);
  Buffer bq = make_f32(gpu, q), bo = gpu.alloc(n_tok * head_len);
  gpu.attention(bq, s.kv(), n_tok, sh, bo);
  const auto batched = fetch(gpu, bo, n_tok * head_len);
  for (int64_t t = 0; t < n_tok; ++t) {
    const std::vector<float> qt(q.begin() + t * head_len, q.begin() + (t + 1) * head_len);
    Buffer q1 = make_f32(gpu, qt), o1 = gpu.alloc(head_len);
    Buffer seq1 = make_i32(gpu, {l.tok_seq[static_cast<size_t>(t)]});
    Buffer pos1 = make_i32(gpu, {l.tok_pos[static_cast<size_t>(t)]});
    PagedKv kv1 = s.kv();
    kv1.token_seq = &seq1;
    kv1.positions = &pos1;
    gpu.attention(q1, kv1, 1, sh, o1);
    const auto alone = fetch(gpu, o1, head_len);
    CHECK(std::equal(alone.begin(), alone.end(), batched.begin() + t * head_len));
  }
}
