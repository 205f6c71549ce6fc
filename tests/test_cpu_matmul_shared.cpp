// matmul_fast_shared (several weights over one input, one conversion of x per activation
// format, one hand-off to the pool) against the scalar matmul_fast on each weight alone on one
// thread, bit for bit, on every instruction set this CPU has and 1 to 3 threads;
// Backend::matmul_shared on the fast and the reference backends; bad arguments.
#include <algorithm>
#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_fast_backend.h"
#include "backend/cpu/matmul_blocking.h"
#include "backend/cpu/matmul_fast.h"
#include "backend/cpu/thread_pool.h"
#include "backend/cpu/weight_repack.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "support/backend_buffers.h"
#include "support/matmul_cases.h"

using namespace llmctl;
using namespace llmctl::cpu;
using namespace llmctl::test;

namespace {

struct Group {
  const char* what;
  std::vector<GgmlType> types;
  std::vector<int64_t> rows;
};

// q, k, v-like groups (one type; a Q4_K_M file's Q6_K v), gate and up, and formats that
// cannot share a conversion (Q4_0's and Q8_0's different offsets, int8 and f16 and f32).
const Group kGroups[] = {
    {"Q4_1 x3", {GgmlType::Q4_1, GgmlType::Q4_1, GgmlType::Q4_1}, {40, 17, 33}},
    {"Q4_K, Q4_K, Q6_K", {GgmlType::Q4_K, GgmlType::Q4_K, GgmlType::Q6_K}, {48, 16, 9}},
    {"Q5_0 x2", {GgmlType::Q5_0, GgmlType::Q5_0}, {70, 70}},
    {"Q4_0, Q8_0, Q5_K", {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q5_K}, {24, 31, 8}},
    {"F16, Q8_0, F16", {GgmlType::F16, GgmlType::Q8_0, GgmlType::F16}, {13, 20, 7}},
    {"F32, BF16", {GgmlType::F32, GgmlType::BF16}, {6, 25}},
    {"IQ4_XS, Q2_K, Q3_K", {GgmlType::IQ4_XS, GgmlType::Q2_K, GgmlType::Q3_K}, {16, 5, 18}},
};

std::vector<Weight> weights(const std::vector<GgmlType>& types, const std::vector<int64_t>& rows,
                            int64_t n, std::mt19937& rng) {
  std::vector<Weight> w;
  for (size_t j = 0; j < types.size(); ++j) w.push_back(make_weight(types[j], rows[j], n, rng));
  return w;
}

void check_group(const Group& g, MatmulIsa isa, bool repacked, int64_t n_tokens, int n_threads,
                 std::mt19937& rng) {
  const int64_t n = 512;
  const size_t count = g.types.size();
  ThreadPool pool(n_threads);
  const std::vector<Weight> ws = weights(g.types, g.rows, n, rng);
  std::vector<WeightView> views;
  std::vector<std::vector<float>> outs;
  for (size_t j = 0; j < count; ++j)
    outs.emplace_back(static_cast<size_t>(n_tokens * g.rows[j]), -1.0f);
  for (const Weight& w : ws) views.push_back(w.view());
  const std::vector<float> x = make_x(n_tokens, n, rng);
  std::vector<RepackedWeight> copies(count);
  MatmulJob jobs[kMaxSharedMatmuls];
  for (size_t j = 0; j < count; ++j) {
    const bool rp = repacked && repack_supported(g.types[j], isa);
    if (rp) copies[j] = repack_weight(views[j], pool);
    jobs[j] = MatmulJob{&views[j], outs[j].data(), rp ? copies[j].data() : nullptr};
  }
  MatmulScratch scratch[kMaxSharedMatmuls];
  matmul_fast_shared(jobs, static_cast<int>(count), x.data(), n_tokens, pool, scratch,
                     MatmulPrecision::Fast, isa);
  for (size_t j = 0; j < count; ++j) {
    INFO(g.what << ": weight " << j << " (" << ggml_type_name(g.types[j]) << "), "
                << matmul_isa_name(isa) << (repacked ? " repacked" : "") << ", n_tokens "
                << n_tokens << ", " << n_threads << " threads");
    // the judge: the scalar kernel, alone, on one thread (every kernel's bits, any -t)
    const std::vector<float> alone = run(MatmulIsa::Scalar, ws[j], x, n_tokens, 1);
    CHECK(same_bits(alone.data(), outs[j].data(), n_tokens * g.rows[j]));
  }
}

}  // namespace

TEST_CASE("matmul_fast_shared: each output has matmul_fast's bits", "[cpu]") {
  std::mt19937 rng(29);
  for (MatmulIsa isa : isas())
    for (const Group& g : kGroups)
      for (bool repacked : {false, true})
        for (int64_t n_tokens : {1, 3, 19})
          for (int n_threads : {1, 2, 3}) check_group(g, isa, repacked, n_tokens, n_threads, rng);
  if (!matmul_fast_has_avx512()) WARN("AVX-512 part skipped: no AVX-512 on this CPU");
}

TEST_CASE("matmul_fast_shared: one conversion of x per activation format", "[cpu]") {
  std::mt19937 rng(31);
  const int64_t n = 256, n_tokens = 4;
  const std::vector<Weight> w =
      weights({GgmlType::Q4_K, GgmlType::Q4_K, GgmlType::F16}, {16, 8, 8}, n, rng);
  const WeightView va = w[0].view(), vb = w[1].view(), vc = w[2].view();
  const std::vector<float> x = make_x(n_tokens, n, rng);
  std::vector<float> oa(16 * n_tokens), ob(8 * n_tokens), oc(8 * n_tokens);
  ThreadPool pool(2);
  MatmulScratch scratch[kMaxSharedMatmuls];
  const MatmulJob jobs[] = {{&va, oa.data()}, {&vb, ob.data()}, {&vc, oc.data()}};
  matmul_fast_shared(jobs, 3, x.data(), n_tokens, pool, scratch, MatmulPrecision::Fast,
                     MatmulIsa::Scalar);
  CHECK(scratch[0].qs.size() == static_cast<size_t>(n * n_tokens));
  CHECK(scratch[1].qs.empty());  // b read a's conversion
  CHECK(scratch[1].xh.empty());
  CHECK(scratch[2].qs.empty());  // F16: f16 halves of its own
  CHECK(scratch[2].xh.size() == static_cast<size_t>(n * n_tokens));
  // Q8_0: int8 too, but one scale per 32 elements where Q4_K has one per 256
  const std::vector<Weight> w6 = weights({GgmlType::Q8_0}, {8}, n, rng);
  const WeightView vd = w6[0].view();
  MatmulScratch scratch2[kMaxSharedMatmuls];
  const MatmulJob mixed[] = {{&va, oa.data()}, {&vd, ob.data()}};
  matmul_fast_shared(mixed, 2, x.data(), n_tokens, pool, scratch2, MatmulPrecision::Fast,
                     MatmulIsa::Scalar);
  CHECK(scratch2[0].qs.size() == static_cast<size_t>(n * n_tokens));
  CHECK(scratch2[1].qs.size() == static_cast<size_t>(n * n_tokens));
}

TEST_CASE("matmul_fast_shared: bad arguments", "[cpu]") {
  std::mt19937 rng(37);
  const Weight a = make_weight(GgmlType::Q8_0, 8, 64, rng),
               b = make_weight(GgmlType::Q8_0, 8, 96, rng);
  const WeightView va = a.view(), vb = b.view();
  std::vector<float> x(96, 1.0f), o1(8), o2(8);
  ThreadPool pool(1);
  MatmulScratch scratch[kMaxSharedMatmuls];
  const MatmulJob four[] = {{&va, o1.data()}, {&va, o2.data()}, {&va, o1.data()}, {&va, o2.data()}};
  CHECK_THROWS_WITH(matmul_fast_shared(four, 4, x.data(), 1, pool, scratch),
                    Catch::Contains("expected 1 to 3 weights, got 4"));
  CHECK_THROWS_WITH(matmul_fast_shared(four, 0, x.data(), 1, pool, scratch),
                    Catch::Contains("expected 1 to 3 weights, got 0"));
  const MatmulJob lengths[] = {{&va, o1.data()}, {&vb, o2.data()}};
  CHECK_THROWS_WITH(matmul_fast_shared(lengths, 2, x.data(), 1, pool, scratch),
                    Catch::Contains("has rows of 96 elements, 'w' of 64"));
  const MatmulJob same_out[] = {{&va, o1.data()}, {&va, o1.data()}};
  CHECK_THROWS_WITH(matmul_fast_shared(same_out, 2, x.data(), 1, pool, scratch),
                    Catch::Contains("write the same output"));
}

TEST_CASE("Backend::matmul_shared: matmul's outputs on the fast and reference backends", "[cpu]") {
  std::mt19937 rng(41);
  const int64_t n = 256, n_tokens = 3;
  const std::vector<Weight> w =
      weights({GgmlType::Q4_K, GgmlType::Q4_K, GgmlType::Q6_K}, {40, 16, 16}, n, rng);
  const Weight &q = w[0], &k = w[1], &v = w[2];
  const std::vector<float> xs = make_x(n_tokens, n, rng);
  CpuFastBackend fast(2);
  CpuBackend ref;
  for (Backend* be : {static_cast<Backend*>(&fast), static_cast<Backend*>(&ref)}) {
    INFO(be->name());
    const WeightView wq = be->bind_weight(q.view()), wk = be->bind_weight(k.view()),
                     wv = be->bind_weight(v.view());
    Buffer x = make(*be, xs);
    Buffer oq = be->alloc(40 * n_tokens), ok = be->alloc(16 * n_tokens),
           ov = be->alloc(16 * n_tokens), alone = be->alloc(40 * n_tokens);
    const WeightView* ws[] = {&wq, &wk, &wv};
    Buffer* outs[] = {&oq, &ok, &ov};
    be->matmul_shared(ws, outs, 3, x, n_tokens);
    for (int j = 0; j < 3; ++j) {
      be->matmul(*ws[j], x, n_tokens, alone);
      const std::vector<float> a = read(*be, alone), s = read(*be, *outs[j]);
      CHECK(same_bits(a.data(), s.data(), ws[j]->n_rows * n_tokens));
    }
    Buffer* aliased[] = {&oq, &x};
    CHECK_THROWS_WITH(be->matmul_shared(ws, aliased, 2, x, n_tokens), Catch::Contains("aliases x"));
    Buffer* twice[] = {&ok, &ok};
    const WeightView* kk[] = {&wk, &wk};
    CHECK_THROWS_WITH(be->matmul_shared(kk, twice, 2, x, n_tokens),
                      Catch::Contains("write the same buffer"));
    Buffer small = be->alloc(8);
    Buffer* short_out[] = {&small};
    CHECK_THROWS(be->matmul_shared(ws, short_out, 1, x, n_tokens));
  }
}

// The prefill's cache blocking (matmul_blocking.h): whole tiles, never fewer than one, and no
// smaller than the sizes it had before it followed L2 (96 KiB row blocks, 384 KiB chunks,
// 128-token packed chunks); with pack_fills_l2, half of L2 where sysfs gives it.
TEST_CASE("matmul blocking: whole tiles, at least the fixed sizes, more with a larger L2",
          "[cpu]") {
  using llmctl::cpu::MatmulKernel;
  MatmulKernel f;  // a float kernel: 6 x 8 tiles in row blocks
  f.rows_prefill = 6;
  f.tokens_prefill = 8;
  for (int64_t stride : {int64_t{2}, int64_t{4096}, int64_t{16384}, int64_t{1} << 20}) {
    const int64_t rows = llmctl::cpu::row_block_rows(f, stride);
    CHECK(rows % 6 == 0);
    CHECK(rows >= 6);
    CHECK(rows >= 96 * 1024 / stride / 6 * 6);
  }
  MatmulKernel q;  // a quantized kernel that packs, 8 tokens a tile
  q.tokens_prefill = 8;
  q.pack = [](const llmctl::cpu::TileArgs&, int, uint8_t*) {};
  // n = 8192 with its block scales: 384 KiB holds 37 tokens, a packing kernel takes 128
  CHECK(llmctl::cpu::chunk_tokens(q, 10240) == 128);
  const int64_t token_bytes = 2560;  // n = 2048: 384 KiB holds 153 tokens
  CHECK(llmctl::cpu::chunk_tokens(q, token_bytes) == 152);
  q.pack_fills_l2 = true;
  const int64_t l2 = llmctl::cpu_cache_bytes(2);
  const int64_t filled = llmctl::cpu::chunk_tokens(q, token_bytes);
  CHECK(filled % 8 == 0);
  CHECK(filled == std::max<int64_t>(152, l2 / 2 / token_bytes / 8 * 8));
  MatmulKernel none;  // no pack: 384 KiB of activations, whole tiles
  none.tokens_prefill = 8;
  CHECK(llmctl::cpu::chunk_tokens(none, token_bytes) == 152);
  CHECK(llmctl::cpu::chunk_tokens(none, int64_t{1} << 30) == 8);  // one tile at least
}
