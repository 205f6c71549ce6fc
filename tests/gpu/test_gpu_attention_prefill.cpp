// The prefill attention kernel (kernels/attention_prefill.cu; CudaBackend::attention runs it for
// >= 16 tokens and more tokens than block-table rows, the paged kernel otherwise: every batch
// here is sized for it) over prefill_layout.h's batch: 141 tokens of three sequences, one run
// and two interleaved, cached prefixes. Against
//   - the CPU reference backend, within rounding (head_dim 64/80/100/128/256, GQA ratios
//     1/3/4/32, block sizes 16 and 1, f32 and f16 pools);
//   - the paged per-token kernel (attention_with_stats keeps it): bit for bit, which the design
//     guarantees (kernels/attention_tile_math.cuh) and batch invariance needs;
//   - itself alone (one token: the paged kernel) and in other batches: bit for bit;
//   - bad indices: NaN heads for bad tokens, skipped bad blocks, the error at the next sync;
//   - and, calling both launchers directly, the paged kernel bit for bit at any batch size
//     (1 to 146 tokens, also those attention_impl gives the paged kernel; mixed tiles, bad
//     tokens, the same error flag).
#include <cuda_runtime_api.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "backend/cuda/buffer.h"
#include "backend_pair.h"
#include "kernels/kernels.h"
#include "paged_layout.h"
#include "prefill_layout.h"

using namespace llmctl;
using llmctl::test::fetch;
using llmctl::test::fill;
using llmctl::test::Layout;
using llmctl::test::make_f32;
using llmctl::test::make_i32;
using llmctl::test::make_prefill_layout;
using llmctl::test::max_abs_diff;
using llmctl::test::PagedSetup;
using llmctl::test::prefill_token_good;
using llmctl::test::random_floats;
using llmctl::test::same_bits;

namespace {

// K/V rows for every stored position of the layout (prefill_layout.h) on backend b.
PagedSetup fill_random(Backend& b, const Layout& l, BufferType pool) {
  const size_t n = l.slots.size() * static_cast<size_t>(l.kv_dim);
  return fill(b, l, pool, random_floats(n, 21, -2.0f, 2.0f), random_floats(n, 22));
}

// `out` of the paged kernel for the same call (attention_with_stats always uses it).
std::vector<float> paged_out(cuda::CudaBackend& gpu, const Buffer& q, const PagedKv& kv,
                             int64_t n_tok, const AttentionShape& sh) {
  const int64_t len = n_tok * sh.n_heads * sh.head_dim;
  Buffer out = gpu.alloc(len), stats = gpu.alloc(n_tok * sh.n_heads * kAttnStatFields);
  gpu.attention_with_stats(q, kv, n_tok, sh, out, stats);
  return fetch(gpu, out, len);
}

}  // namespace

TEST_CASE("cuda prefill attention equals the CPU, and the paged kernel bit for bit", "[gpu]") {
  cpu::CpuBackend cpu;
  cuda::CudaBackend gpu(0);
  const AttentionShape shapes[] = {{4, 4, 64},  {16, 4, 64},  {4, 4, 80},  {16, 4, 80},
                                   {4, 4, 128}, {16, 4, 128}, {2, 2, 256}, {8, 2, 256},
                                   {6, 2, 100}, {32, 1, 64}};
  for (const AttentionShape& sh : shapes) {
    for (const int64_t block_size : {16, 1}) {
      for (const BufferType pool : {BufferType::F32, BufferType::F16}) {
        CAPTURE(sh.n_heads, sh.n_kv_heads, sh.head_dim, block_size, buffer_type_name(pool));
        const Layout l = make_prefill_layout(block_size, sh.n_kv_heads * sh.head_dim, false);
        const auto n_tok = static_cast<int64_t>(l.tok_seq.size());
        const PagedSetup cc = fill_random(cpu, l, pool), gc = fill_random(gpu, l, pool);
        const int64_t len = n_tok * sh.n_heads * sh.head_dim;
        const auto q = random_floats(static_cast<size_t>(len), 23, -2.0f, 2.0f);
        Buffer cq = make_f32(cpu, q), gq = make_f32(gpu, q);
        Buffer co = cpu.alloc(len), go = gpu.alloc(len);
        cpu.attention(cq, cc.kv(), n_tok, sh, co);
        gpu.attention(gq, gc.kv(), n_tok, sh, go);
        const auto got = fetch(gpu, go, len);
        // As test_gpu_attention.cpp: ~1e-6 apart typically, 1e-4 for the long heads; a wrong
        // position, block, head or sequence moves outputs by ~1e-1.
        CHECK(max_abs_diff(got, fetch(cpu, co, len)) <= 1e-4);
        CHECK(same_bits(got, paged_out(gpu, gq, gc.kv(), n_tok, sh)));
      }
    }
  }
}

TEST_CASE("cuda prefill attention is batch-invariant: alone or in any batch, bitwise", "[gpu]") {
  cuda::CudaBackend gpu(0);
  for (const AttentionShape& sh : {AttentionShape{16, 4, 128}, AttentionShape{4, 4, 80}}) {
    CAPTURE(sh.n_heads, sh.n_kv_heads, sh.head_dim);
    const Layout l = make_prefill_layout(16, sh.n_kv_heads * sh.head_dim, false);
    const PagedSetup c = fill_random(gpu, l, BufferType::F16);
    const auto n_tok = static_cast<int64_t>(l.tok_seq.size());
    const int64_t head_len = sh.n_heads * sh.head_dim;
    const auto q = random_floats(static_cast<size_t>(n_tok * head_len), 24, -2.0f, 2.0f);
    Buffer bq = make_f32(gpu, q), bo = gpu.alloc(n_tok * head_len);
    gpu.attention(bq, c.kv(), n_tok, sh, bo);
    const auto batched = fetch(gpu, bo, n_tok * head_len);
    // Tokens [first, first + n) as a batch of their own: other tiles, other tile neighbours;
    // n = 1 runs the paged kernel, n >= 16 the prefill kernel.
    auto sub_batch = [&](int64_t first, int64_t n) {
      const int64_t off = first * head_len;
      const std::vector<float> qs(q.begin() + off, q.begin() + off + n * head_len);
      const std::vector<int32_t> seq(l.tok_seq.begin() + first, l.tok_seq.begin() + first + n);
      const std::vector<int32_t> pos(l.tok_pos.begin() + first, l.tok_pos.begin() + first + n);
      Buffer sq = make_f32(gpu, qs), so = gpu.alloc(n * head_len);
      Buffer sseq = make_i32(gpu, seq), spos = make_i32(gpu, pos);
      PagedKv kv = c.kv();
      kv.token_seq = &sseq;
      kv.positions = &spos;
      gpu.attention(sq, kv, n, sh, so);
      const auto got = fetch(gpu, so, n * head_len);
      const std::vector<float> want(batched.begin() + off, batched.begin() + off + n * head_len);
      return same_bits(got, want);
    };
    for (int64_t t = 0; t < n_tok; t += 7) {
      CAPTURE(t);
      CHECK(sub_batch(t, 1));
    }
    CHECK(sub_batch(n_tok - 1, 1));
    CHECK(sub_batch(1, n_tok - 1));  // every tile boundary moves by one token
    CHECK(sub_batch(30, 20));        // the end of the run and the start of the interleaving
    CHECK(sub_batch(60, 17));
  }
}

TEST_CASE("cuda prefill attention: bad indices give NaN heads and the error at the next sync",
          "[gpu]") {
  cuda::CudaBackend gpu(0);
  const AttentionShape sh{8, 2, 64};
  for (const BufferType pool : {BufferType::F32, BufferType::F16}) {
    CAPTURE(buffer_type_name(pool));
    const Layout l = make_prefill_layout(16, sh.n_kv_heads * sh.head_dim, true);
    const PagedSetup c = fill_random(gpu, l, pool);
    const auto n_tok = static_cast<int64_t>(l.tok_seq.size());
    const int64_t head_len = sh.n_heads * sh.head_dim;
    const auto q = random_floats(static_cast<size_t>(n_tok * head_len), 25);
    Buffer bq = make_f32(gpu, q), bo = gpu.alloc(n_tok * head_len);
    gpu.attention(bq, c.kv(), n_tok, sh, bo);
    REQUIRE_THROWS_WITH(gpu.sync(), Catch::Contains("attention got a sequence row"));
    const auto got = fetch(gpu, bo, n_tok * head_len);  // the flag is clear again
    int n_bad = 0;
    for (int64_t t = 0; t < n_tok; ++t) {
      CAPTURE(t, l.tok_seq[static_cast<size_t>(t)], l.tok_pos[static_cast<size_t>(t)]);
      const float* oh = got.data() + t * head_len;
      if (prefill_token_good(l, t) || l.tok_seq[static_cast<size_t>(t)] == 3) {
        // Row 3's token sees its good block (zero K/V rows) and skips the bad ones.
        for (int64_t i = 0; i < head_len; ++i) REQUIRE(std::isfinite(oh[i]));
      } else {
        ++n_bad;
        for (int64_t i = 0; i < head_len; ++i) REQUIRE(std::isnan(oh[i]));
      }
    }
    CHECK(n_bad == 4);
    // The paged kernel: the same bits, NaN heads included, and the same error.
    const int64_t len = n_tok * head_len;
    Buffer po = gpu.alloc(len), stats = gpu.alloc(n_tok * sh.n_heads * kAttnStatFields);
    gpu.attention_with_stats(bq, c.kv(), n_tok, sh, po, stats);
    REQUIRE_THROWS_WITH(gpu.sync(), Catch::Contains("attention got a sequence row"));
    CHECK(same_bits(got, fetch(gpu, po, len)));
  }
}

TEST_CASE("the prefill launcher equals the paged one bit for bit at any batch size", "[gpu]") {
  // Both launchers directly (attention_impl picks one by batch size), on windows of the batch
  // with bad tokens: one-sequence tiles, mixed tiles, bad tokens, 1 to 146 tokens.
  cuda::CudaBackend gpu(0);
  const AttentionShape sh{12, 4, 80};  // GQA 3: tiles of 5 tokens
  for (const BufferType pool : {BufferType::F32, BufferType::F16}) {
    CAPTURE(buffer_type_name(pool));
    const Layout l = make_prefill_layout(16, sh.n_kv_heads * sh.head_dim, true);
    const PagedSetup c = fill_random(gpu, l, pool);
    const auto n_all = static_cast<int64_t>(l.tok_seq.size());
    const int64_t head_len = sh.n_heads * sh.head_dim;
    const auto q = random_floats(static_cast<size_t>(n_all * head_len), 26, -2.0f, 2.0f);
    const struct {
      int64_t first, n;
    } windows[] = {{0, 1}, {0, 2}, {35, 3}, {36, 7}, {60, 16}, {85, 9}, {100, 17}, {0, n_all}};
    for (const auto& w : windows) {
      CAPTURE(w.first, w.n);
      const int64_t off = w.first * head_len, len = w.n * head_len;
      Buffer bq = make_f32(gpu, std::vector<float>(q.begin() + off, q.begin() + off + len));
      Buffer seq = make_i32(gpu, std::vector<int32_t>(l.tok_seq.begin() + w.first,
                                                      l.tok_seq.begin() + w.first + w.n));
      Buffer pos = make_i32(gpu, std::vector<int32_t>(l.tok_pos.begin() + w.first,
                                                      l.tok_pos.begin() + w.first + w.n));
      Buffer out_prefill = gpu.alloc(len), out_paged = gpu.alloc(len);
      gpu.sync();  // the launches below run on the default stream
      cuda::PagedAttentionArgs a;
      a.n_tokens = w.n;
      a.n_heads = sh.n_heads;
      a.n_kv_heads = sh.n_kv_heads;
      a.head_dim = sh.head_dim;
      a.n_slots = l.n_blocks * l.block_size;
      a.block_size = l.block_size;
      a.block_table = c.block_table.i32();
      a.n_seq_rows = static_cast<int64_t>(l.table.size()) / l.max_blocks;
      a.max_blocks = l.max_blocks;
      a.token_seq = seq.i32();
      a.positions = pos.i32();
      a.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(sh.head_dim)));
      const int zero[2] = {0, 0};
      cuda::DeviceBuffer flags(sizeof zero);
      flags.upload(zero, sizeof zero);
      int* flag = flags.as<int>();
      if (pool == BufferType::F32) {
        cuda::launch_attention_prefill_f32(bq.data(), c.k_pool.data(), c.v_pool.data(), a,
                                           out_prefill.data(), flag, nullptr);
        cuda::launch_attention_paged_f32(bq.data(), c.k_pool.data(), c.v_pool.data(), a,
                                         out_paged.data(), flag + 1, nullptr);
      } else {
        cuda::launch_attention_prefill_f16(bq.data(), c.k_pool.f16(), c.v_pool.f16(), a,
                                           out_prefill.data(), flag, nullptr);
        cuda::launch_attention_paged_f16(bq.data(), c.k_pool.f16(), c.v_pool.f16(), a,
                                         out_paged.data(), flag + 1, nullptr);
      }
      REQUIRE(cudaGetLastError() == cudaSuccess);
      REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
      int got_flags[2] = {-1, -1};
      flags.download(got_flags, sizeof got_flags);
      CHECK(got_flags[0] == got_flags[1]);  // kDeviceErrorAttentionIndex where bad tokens are
      CHECK(same_bits(fetch(gpu, out_prefill, len), fetch(gpu, out_paged, len)));
    }
  }
}
