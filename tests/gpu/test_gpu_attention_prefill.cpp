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

// prefill_layout.h's batch on backend b: pools filled through kv_store and random queries q
// (n_tok, n_heads, head_dim); fixed seeds, so every backend gets the same values.
struct Batch {
  Layout l;
  PagedSetup cache;
  int64_t n_tok = 0, head_len = 0;
  std::vector<float> q;
};

Batch make_batch(Backend& b, const AttentionShape& sh, int64_t block_size, BufferType pool,
                 bool bad_tokens) {
  Batch x;
  x.l = make_prefill_layout(block_size, sh.n_kv_heads * sh.head_dim, bad_tokens);
  const size_t n = x.l.slots.size() * static_cast<size_t>(x.l.kv_dim);
  x.cache = fill(b, x.l, pool, random_floats(n, 21, -2.0f, 2.0f), random_floats(n, 22));
  x.n_tok = static_cast<int64_t>(x.l.tok_seq.size());
  x.head_len = sh.n_heads * sh.head_dim;
  x.q = random_floats(static_cast<size_t>(x.n_tok * x.head_len), 23, -2.0f, 2.0f);
  return x;
}

// Tokens [first, first + n) of a batch as a batch of their own on b.
struct Window {
  Buffer q, seq, pos;
};

Window window(Backend& b, const Batch& x, int64_t first, int64_t n) {
  const auto q0 = x.q.begin() + first * x.head_len;
  const auto s0 = x.l.tok_seq.begin() + first, p0 = x.l.tok_pos.begin() + first;
  return Window{make_f32(b, std::vector<float>(q0, q0 + n * x.head_len)),
                make_i32(b, std::vector<int32_t>(s0, s0 + n)),
                make_i32(b, std::vector<int32_t>(p0, p0 + n))};
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
        const Batch cb = make_batch(cpu, sh, block_size, pool, false);
        const Batch gb = make_batch(gpu, sh, block_size, pool, false);
        const int64_t len = gb.n_tok * gb.head_len;
        Buffer cq = make_f32(cpu, cb.q), gq = make_f32(gpu, gb.q);
        Buffer co = cpu.alloc(len), go = gpu.alloc(len);
        cpu.attention(cq, cb.cache.kv(), cb.n_tok, sh, co);
        gpu.attention(gq, gb.cache.kv(), gb.n_tok, sh, go);
        const auto got = fetch(gpu, go, len);
        // As test_gpu_attention.cpp: ~1e-6 apart typically, 1e-4 for the long heads; a wrong
        // position, block, head or sequence moves outputs by ~1e-1.
        CHECK(max_abs_diff(got, fetch(cpu, co, len)) <= 1e-4);
        CHECK(same_bits(got, paged_out(gpu, gq, gb.cache.kv(), gb.n_tok, sh)));
      }
    }
  }
}

TEST_CASE("cuda attention options (scale, soft-cap, window) equal the CPU on both kernels",
          "[gpu]") {
  // The window, the soft-cap and an explicit scale through the prefill kernel (attention()) and
  // the paged one (attention_with_stats()): each within 1e-4 of the CPU reference (tanhf and the
  // fma order differ; a position inside/outside the window by one moves outputs by ~1e-1), the
  // two bit for bit, the statistics' counts exact (the window's length) and max/min within
  // 1e-4 (capped scores). Window 1: every head is its own V row.
  cpu::CpuBackend cpu;
  cuda::CudaBackend gpu(0);
  struct Options {
    float scale, softcap;
    int32_t window;
  };
  const Options options[] = {{0.0f, 0.0f, 1}, {0.0f, 0.0f, 5},   {0.0f, 0.0f, 64},
                             {0.0f, 2.0f, 0}, {0.3f, 0.0f, 0},   {0.0625f, 50.0f, 16},
                             {0.0f, 1.5f, 7}, {0.0f, 0.0f, 4096}};
  for (const AttentionShape& base : {AttentionShape{16, 4, 64}, AttentionShape{6, 2, 100}}) {
    for (const Options& o : options) {
      for (const BufferType pool : {BufferType::F32, BufferType::F16}) {
        AttentionShape sh = base;
        sh.scale = o.scale;
        sh.softcap = o.softcap;
        sh.window = o.window;
        CAPTURE(sh.n_heads, sh.head_dim, o.scale, o.softcap, o.window, buffer_type_name(pool));
        const Batch cb = make_batch(cpu, sh, 16, pool, false);
        const Batch gb = make_batch(gpu, sh, 16, pool, false);
        const int64_t len = gb.n_tok * gb.head_len,
                      st_len = gb.n_tok * sh.n_heads * kAttnStatFields;
        Buffer cq = make_f32(cpu, cb.q), gq = make_f32(gpu, gb.q);
        Buffer co = cpu.alloc(len), go = gpu.alloc(len), gp = gpu.alloc(len);
        Buffer cst = cpu.alloc(st_len), gst = gpu.alloc(st_len);
        cpu.attention_with_stats(cq, cb.cache.kv(), cb.n_tok, sh, co, cst);
        gpu.attention(gq, gb.cache.kv(), gb.n_tok, sh, go);
        gpu.attention_with_stats(gq, gb.cache.kv(), gb.n_tok, sh, gp, gst);
        const auto got = fetch(gpu, go, len);
        CHECK(max_abs_diff(got, fetch(cpu, co, len)) <= 1e-4);
        CHECK(same_bits(got, fetch(gpu, gp, len)));
        const auto g_st = fetch(gpu, gst, st_len), c_st = fetch(cpu, cst, st_len);
        for (int64_t row = 0; row < gb.n_tok * sh.n_heads; ++row) {
          const float* g = g_st.data() + row * kAttnStatFields;
          const float* c = c_st.data() + row * kAttnStatFields;
          CHECK(g[kAttnStatCount] == c[kAttnStatCount]);
          CHECK(std::fabs(g[kAttnStatMax] - c[kAttnStatMax]) <= 1e-4f);
          CHECK(std::fabs(g[kAttnStatMin] - c[kAttnStatMin]) <= 1e-4f);
        }
      }
    }
  }
}

TEST_CASE("cuda prefill attention is batch-invariant: alone or in any batch, bitwise", "[gpu]") {
  cuda::CudaBackend gpu(0);
  for (const AttentionShape& sh : {AttentionShape{16, 4, 128}, AttentionShape{4, 4, 80}}) {
    CAPTURE(sh.n_heads, sh.n_kv_heads, sh.head_dim);
    const Batch x = make_batch(gpu, sh, 16, BufferType::F16, false);
    Buffer bq = make_f32(gpu, x.q), bo = gpu.alloc(x.n_tok * x.head_len);
    gpu.attention(bq, x.cache.kv(), x.n_tok, sh, bo);
    const auto batched = fetch(gpu, bo, x.n_tok * x.head_len);
    // Tokens [first, first + n) through the backend as a batch of their own: other tiles, other
    // tile neighbours; n = 1 runs the paged kernel, n >= 16 the prefill kernel.
    auto sub_batch = [&](int64_t first, int64_t n) {
      const Window w = window(gpu, x, first, n);
      Buffer out = gpu.alloc(n * x.head_len);
      PagedKv kv = x.cache.kv();
      kv.token_seq = &w.seq;
      kv.positions = &w.pos;
      gpu.attention(w.q, kv, n, sh, out);
      const auto want = batched.begin() + first * x.head_len;
      return same_bits(fetch(gpu, out, n * x.head_len),
                       std::vector<float>(want, want + n * x.head_len));
    };
    for (int64_t t = 0; t < x.n_tok; t += 7) {
      CAPTURE(t);
      CHECK(sub_batch(t, 1));
    }
    CHECK(sub_batch(x.n_tok - 1, 1));
    CHECK(sub_batch(1, x.n_tok - 1));  // every tile boundary moves by one token
    CHECK(sub_batch(30, 20));          // the end of the run and the start of the interleaving
    CHECK(sub_batch(60, 17));
  }
}

TEST_CASE("cuda prefill attention: bad indices give NaN heads and the error at the next sync",
          "[gpu]") {
  cuda::CudaBackend gpu(0);
  const AttentionShape sh{8, 2, 64};
  for (const BufferType pool : {BufferType::F32, BufferType::F16}) {
    CAPTURE(buffer_type_name(pool));
    const Batch x = make_batch(gpu, sh, 16, pool, true);
    const int64_t len = x.n_tok * x.head_len;
    Buffer bq = make_f32(gpu, x.q), bo = gpu.alloc(len);
    gpu.attention(bq, x.cache.kv(), x.n_tok, sh, bo);
    REQUIRE_THROWS_WITH(gpu.sync(), Catch::Contains("attention got a sequence row"));
    const auto got = fetch(gpu, bo, len);  // the flag is clear again
    int n_bad = 0;
    for (int64_t t = 0; t < x.n_tok; ++t) {
      const int32_t seq = x.l.tok_seq[static_cast<size_t>(t)];
      CAPTURE(t, seq, x.l.tok_pos[static_cast<size_t>(t)]);
      const float* oh = got.data() + t * x.head_len;
      if (prefill_token_good(x.l, t) || seq == 3) {
        // Row 3's token sees its good block (zero K/V rows) and skips the bad ones.
        for (int64_t i = 0; i < x.head_len; ++i) REQUIRE(std::isfinite(oh[i]));
      } else {
        ++n_bad;
        for (int64_t i = 0; i < x.head_len; ++i) REQUIRE(std::isnan(oh[i]));
      }
    }
    CHECK(n_bad == 4);
    // The paged kernel: the same bits, NaN heads included, and the same error.
    Buffer po = gpu.alloc(len), stats = gpu.alloc(x.n_tok * sh.n_heads * kAttnStatFields);
    gpu.attention_with_stats(bq, x.cache.kv(), x.n_tok, sh, po, stats);
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
    const Batch x = make_batch(gpu, sh, 16, pool, true);
    const struct {
      int64_t first, n;
    } windows[] = {{0, 1}, {0, 2}, {35, 3}, {36, 7}, {60, 16}, {85, 9}, {100, 17}, {0, x.n_tok}};
    for (const auto& wi : windows) {
      CAPTURE(wi.first, wi.n);
      const Window w = window(gpu, x, wi.first, wi.n);
      const int64_t len = wi.n * x.head_len;
      Buffer out_prefill = gpu.alloc(len), out_paged = gpu.alloc(len);
      gpu.sync();  // the launches below run on the default stream
      cuda::PagedAttentionArgs a;
      a.n_tokens = wi.n;
      a.n_heads = sh.n_heads;
      a.n_kv_heads = sh.n_kv_heads;
      a.head_dim = sh.head_dim;
      a.n_slots = x.l.n_blocks * x.l.block_size;
      a.block_size = x.l.block_size;
      a.block_table = x.cache.block_table.i32();
      a.n_seq_rows = static_cast<int64_t>(x.l.table.size()) / x.l.max_blocks;
      a.max_blocks = x.l.max_blocks;
      a.token_seq = w.seq.i32();
      a.positions = w.pos.i32();
      a.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(sh.head_dim)));
      const int zero[2] = {0, 0};
      cuda::DeviceBuffer flags(sizeof zero);
      flags.upload(zero, sizeof zero);
      int* flag = flags.as<int>();
      const PagedSetup& c = x.cache;
      if (pool == BufferType::F32) {
        cuda::launch_attention_prefill_f32(w.q.data(), c.k_pool.data(), c.v_pool.data(), a,
                                           out_prefill.data(), flag, nullptr);
        cuda::launch_attention_paged_f32(w.q.data(), c.k_pool.data(), c.v_pool.data(), a,
                                         out_paged.data(), flag + 1, nullptr);
      } else {
        cuda::launch_attention_prefill_f16(w.q.data(), c.k_pool.f16(), c.v_pool.f16(), a,
                                           out_prefill.data(), flag, nullptr);
        cuda::launch_attention_paged_f16(w.q.data(), c.k_pool.f16(), c.v_pool.f16(), a,
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
