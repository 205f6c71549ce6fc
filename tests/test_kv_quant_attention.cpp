// Attention over a quantized KV cache (backend.h BufferType Q8_0 / Q4_0, ggml's blocks of 32
// values along each head), on the CPU:
//   * kv_store writes quantize_row's bytes (the reference quantizer, checked against gguf-py in
//     test_quantize.cpp), row by row, K and V each in its own type;
//   * both CPU backends agree with a float64 attention written here over blocks decoded here
//     (its own fp16 and block decoding, not quant/dequant.h);
//   * the fast kernel agrees with the reference within 1e-5, its AVX-512 loops give its AVX2
//     loops' bits, a KV group at once gives each head's bits, and a token has the same bits
//     alone or batched at any thread count (the attention contract);
//   * pools a block type cannot hold are refused with what was expected.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/attention_fast.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_fast_backend.h"
#include "quant/quantize.h"
#include "support/backend_buffers.h"
#include "support/random_data.h"

using namespace llmctl;
using llmctl::test::make;
using llmctl::test::make_ids;
using llmctl::test::random_floats;
using llmctl::test::read;

namespace {

constexpr BufferType kQ8 = BufferType::Q8_0, kQ4 = BufferType::Q4_0;

// K and V pool types to cover: each block type alone, mixed with each other and with f16/f32.
struct PoolTypes {
  BufferType k, v;
};
const std::vector<PoolTypes> kPoolTypes = {{kQ8, kQ8}, {kQ4, kQ4},
                                           {kQ8, kQ4}, {kQ4, kQ8},
                                           {kQ8, BufferType::F16}, {BufferType::F32, kQ4}};

// n_pos positions of one sequence in blocks of 4, the blocks in reverse order in the pool; the
// host copies of K and V as stored.
struct Cache {
  Buffer k_pool, v_pool, table, seq_rows, pos;
  int64_t max_blocks = 0;
  std::vector<int32_t> slots;
  PagedKv kv() const { return PagedKv{&k_pool, &v_pool, 4, &table, max_blocks, &seq_rows, &pos}; }
};

Cache make_cache(Backend& be, std::mt19937& rng, int64_t n_pos, int64_t kv_dim, PoolTypes t,
                 const std::vector<int32_t>& positions) {
  Cache c;
  c.max_blocks = (n_pos + 3) / 4;
  c.k_pool = be.alloc(c.max_blocks * 4 * kv_dim, t.k);
  c.v_pool = be.alloc(c.max_blocks * 4 * kv_dim, t.v);
  std::vector<int32_t> blocks;
  for (int64_t b = 0; b < c.max_blocks; ++b)
    blocks.push_back(static_cast<int32_t>(c.max_blocks - 1 - b));
  for (int64_t j = 0; j < n_pos; ++j)
    c.slots.push_back(blocks[static_cast<size_t>(j / 4)] * 4 + static_cast<int32_t>(j % 4));
  const Buffer k = make(be, random_floats(rng, static_cast<size_t>(n_pos * kv_dim)));
  const Buffer v = make(be, random_floats(rng, static_cast<size_t>(n_pos * kv_dim)));
  be.kv_store(k, v, make_ids(be, c.slots), n_pos, kv_dim, c.k_pool, c.v_pool);
  c.table = make_ids(be, blocks);
  c.seq_rows = make_ids(be, std::vector<int32_t>(positions.size(), 0));
  c.pos = make_ids(be, positions);
  return c;
}

// -- an independent decoder and a float64 attention ------------------------------------------
double half_to_double(const uint8_t* p) {
  const unsigned h = p[0] | (p[1] << 8);
  const int e = static_cast<int>((h >> 10) & 31), m = static_cast<int>(h & 1023);
  const double v = e == 0 ? std::ldexp(m, -24) : std::ldexp(m + 1024, e - 25);  // no inf/NaN here
  return (h & 0x8000) != 0 ? -v : v;
}

// Value i of the row in `slot` of a pool of rows of kv_dim.
double pool_value(const Buffer& pool, int64_t slot, int64_t kv_dim, int64_t i) {
  const auto* base = static_cast<const uint8_t*>(pool.raw());
  const int64_t e = slot * kv_dim + i;
  switch (pool.type()) {
    case BufferType::F32:
      return static_cast<double>(pool.data()[e]);
    case BufferType::F16:
      return half_to_double(base + 2 * e);
    case BufferType::Q8_0: {
      const uint8_t* b = base + (e / 32) * 34;
      return static_cast<int8_t>(b[2 + e % 32]) * half_to_double(b);
    }
    default: {  // Q4_0: element j < 16 is qs[j]'s low nibble, j >= 16 qs[j - 16]'s high one
      const uint8_t* b = base + (e / 32) * 18;
      const int64_t j = e % 32;
      const int q = j < 16 ? (b[2 + j] & 15) : (b[2 + j - 16] >> 4);
      return (q - 8) * half_to_double(b);
    }
  }
}

// out[t, h] = sum_j softmax(q . K[j] * scale)_j V[j] in double, keys 0 .. positions[t].
std::vector<double> attention_f64(const std::vector<float>& q, const Cache& c,
                                  const std::vector<int32_t>& positions, const AttentionShape& s) {
  const int64_t d = s.head_dim, kv_dim = s.n_kv_heads * d, group = s.n_heads / s.n_kv_heads;
  const auto scale = static_cast<double>(attention_scale(s));
  std::vector<double> out;
  for (size_t t = 0; t < positions.size(); ++t)
    for (int64_t h = 0; h < s.n_heads; ++h) {
      const int64_t g = h / group, n = positions[t] + 1;
      const float* qh = q.data() + (static_cast<int64_t>(t) * s.n_heads + h) * d;
      std::vector<double> sc(static_cast<size_t>(n));
      double mx = -INFINITY;
      for (int64_t j = 0; j < n; ++j) {
        double dot = 0;
        for (int64_t i = 0; i < d; ++i)
          dot += static_cast<double>(qh[i]) *
                 pool_value(c.k_pool, c.slots[static_cast<size_t>(j)], kv_dim, g * d + i);
        sc[static_cast<size_t>(j)] = dot * scale;
        mx = std::max(mx, dot * scale);
      }
      double sum = 0;
      for (double& x : sc) sum += (x = std::exp(x - mx));
      for (int64_t i = 0; i < d; ++i) {
        double o = 0;
        for (int64_t j = 0; j < n; ++j)
          o += sc[static_cast<size_t>(j)] / sum *
               pool_value(c.v_pool, c.slots[static_cast<size_t>(j)], kv_dim, g * d + i);
        out.push_back(o);
      }
    }
  return out;
}

const char* name(PoolTypes t) {
  static std::string s;
  s = std::string("K ") + buffer_type_name(t.k) + " V " + buffer_type_name(t.v);
  return s.c_str();
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

}  // namespace

TEST_CASE("kv_store into q8_0 / q4_0 pools writes the reference quantizer's bytes", "[cpu]") {
  std::mt19937 rng(5);
  const int64_t kv_dim = 96, n = 3;
  const std::vector<float> k = random_floats(rng, n * kv_dim), v = random_floats(rng, n * kv_dim, 0.1f);
  cpu::CpuBackend be;
  for (const PoolTypes t : kPoolTypes) {
    INFO(name(t));
    Buffer kp = be.alloc(4 * kv_dim, t.k), vp = be.alloc(4 * kv_dim, t.v);
    be.kv_store(make(be, k), make(be, v), make_ids(be, {3, 0, 2}), n, kv_dim, kp, vp);
    for (const auto& [pool, src] : {std::pair{&kp, &k}, std::pair{&vp, &v}}) {
      if (!buffer_type_is_block(pool->type())) continue;
      const GgmlType gt = pool->type() == kQ8 ? GgmlType::Q8_0 : GgmlType::Q4_0;
      const size_t row = buffer_bytes(pool->type(), kv_dim);
      std::vector<uint8_t> want(row);
      const size_t slots[] = {3, 0, 2};
      for (int64_t r = 0; r < n; ++r) {
        quantize_row(gt, src->data() + r * kv_dim, want.data(), kv_dim);
        CHECK(std::memcmp(static_cast<const uint8_t*>(pool->raw()) + slots[r] * row, want.data(),
                          row) == 0);
      }
      // slot 1 was not written: still zero
      const auto* s1 = static_cast<const uint8_t*>(pool->raw()) + row;
      CHECK(std::all_of(s1, s1 + row, [](uint8_t b) { return b == 0; }));
    }
  }
}

TEST_CASE("quantized KV attention: both CPU backends against a float64 reference", "[cpu]") {
  cpu::CpuBackend ref;
  cpu::CpuFastBackend fast(2);
  struct Shape {
    int64_t n_heads, n_kv_heads, head_dim;
  };
  for (const Shape sh : {Shape{2, 2, 32}, Shape{4, 1, 64}, Shape{6, 2, 96}, Shape{2, 1, 256}})
    for (const PoolTypes t : kPoolTypes)
      for (Backend* be : std::initializer_list<Backend*>{&ref, &fast}) {
        INFO(be->name() << " threads " << be->n_threads() << " heads " << sh.n_heads << "/"
                        << sh.n_kv_heads << " head_dim " << sh.head_dim << " " << name(t));
        std::mt19937 rng(31);
        const AttentionShape s{sh.n_heads, sh.n_kv_heads, sh.head_dim};
        const std::vector<int32_t> positions = {0, 5, 12};
        const Cache c = make_cache(*be, rng, 13, sh.n_kv_heads * sh.head_dim, t, positions);
        const std::vector<float> q = random_floats(rng, 3 * static_cast<size_t>(sh.n_heads * sh.head_dim));
        Buffer out = be->alloc(static_cast<int64_t>(q.size()));
        be->attention(make(*be, q), c.kv(), 3, s, out);
        const std::vector<float> got = read(*be, out);
        const std::vector<double> want = attention_f64(q, c, positions, s);
        double worst = 0;
        for (size_t i = 0; i < want.size(); ++i)
          worst = std::max(worst, std::abs(static_cast<double>(got[i]) - want[i]));
        CHECK(worst < 1e-5);
      }
}

TEST_CASE("quantized KV attention: the fast kernel within 1e-5 of the reference", "[cpu]") {
  cpu::CpuBackend ref;
  cpu::CpuFastBackend fast(2);
  for (const int64_t n_heads : {int64_t{2}, int64_t{6}, int64_t{16}})
    for (const int64_t d : {int64_t{32}, int64_t{64}, int64_t{96}, int64_t{128}})
      for (const PoolTypes t : kPoolTypes) {
        INFO("n_heads " << n_heads << " head_dim " << d << " " << name(t));
        const AttentionShape s{n_heads, 2, d};
        const std::vector<int32_t> positions = {0, 4, 9, 10};
        std::vector<float> got[2];
        int i = 0;
        for (Backend* be : std::initializer_list<Backend*>{&ref, &fast}) {
          std::mt19937 same(79);  // the same cache and queries on both backends
          const Cache c = make_cache(*be, same, 11, 2 * d, t, positions);
          const Buffer q = make(*be, random_floats(same, static_cast<size_t>(4 * n_heads * d)));
          Buffer out = be->alloc(4 * n_heads * d);
          be->attention(q, c.kv(), 4, s, out);
          got[i++] = read(*be, out);
        }
        for (size_t j = 0; j < got[0].size(); ++j) CHECK(got[1][j] == Approx(got[0][j]).margin(1e-5));
      }
}

TEST_CASE("quantized KV attention: AVX-512 = AVX2 bits, a group = its heads' bits", "[cpu]") {
  if (!cpu::attention_fast_available()) {
    WARN("no AVX2+FMA+F16C: the fast attention kernel does not run on this CPU");
    return;
  }
  std::mt19937 rng(78);
  cpu::CpuBackend be;  // buffers only
  for (const int64_t group : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{4}, int64_t{6}})
    for (const int64_t d : {int64_t{32}, int64_t{64}, int64_t{96}, int64_t{160}, int64_t{256}})
      for (const PoolTypes t : kPoolTypes) {
        INFO("group " << group << " head_dim " << d << " " << name(t));
        const AttentionShape s{2 * group, 2, d};
        std::vector<int32_t> positions;
        for (int32_t p = 0; p <= 20; ++p) positions.push_back(p);
        const Cache c = make_cache(be, rng, 21, 2 * d, t, positions);
        const int64_t n_tok = 21, n_out = n_tok * s.n_heads * d;
        const Buffer q = make(be, random_floats(rng, static_cast<size_t>(n_out)));
        Buffer wide = be.alloc(n_out), narrow = be.alloc(n_out), by_head = be.alloc(n_out);
        std::vector<float> scores;
        for (int64_t tok = 0; tok < n_tok; ++tok) {
          for (int64_t g = 0; g < 2; ++g) {
            cpu::attend_group_fast(q, c.kv(), tok, g, s, wide, scores, nullptr, true);
            cpu::attend_group_fast(q, c.kv(), tok, g, s, narrow, scores, nullptr, false);
          }
          for (int64_t h = 0; h < s.n_heads; ++h)
            cpu::attend_head_fast(q, c.kv(), tok, h, s, by_head, scores);
        }
        if (cpu::attention_fast_has_avx512()) CHECK(same_bits(read(be, wide), read(be, narrow)));
        CHECK(same_bits(read(be, wide), read(be, by_head)));
      }
}

TEST_CASE("quantized KV attention: a token's bits alone or batched, at any thread count",
          "[cpu]") {
  const AttentionShape s{8, 2, 64};
  const int64_t kv_dim = 128, hd = 8 * 64;
  const std::vector<int32_t> positions = {9, 3, 6, 0};
  cpu::CpuBackend ref;
  cpu::CpuFastBackend fast1(1), fast3(3);
  for (const PoolTypes t : kPoolTypes) {
    std::vector<float> first;
    for (Backend* be : std::initializer_list<Backend*>{&ref, &fast1, &fast3}) {
      INFO(name(t) << " " << be->name() << " threads " << be->n_threads());
      std::mt19937 rng(17);
      const Cache c = make_cache(*be, rng, 10, kv_dim, t, positions);
      const std::vector<float> q = random_floats(rng, 4 * static_cast<size_t>(hd));
      Buffer all = be->alloc(4 * hd);
      be->attention(make(*be, q), c.kv(), 4, s, all);
      const std::vector<float> batched = read(*be, all);
      for (size_t tok = 0; tok < positions.size(); ++tok) {
        std::mt19937 again(17);
        const Cache one = make_cache(*be, again, 10, kv_dim, t, {positions[tok]});
        const std::vector<float> qt(q.begin() + static_cast<long>(tok) * hd,
                                    q.begin() + static_cast<long>(tok + 1) * hd);
        Buffer out = be->alloc(hd);
        be->attention(make(*be, qt), one.kv(), 1, s, out);
        CHECK(same_bits(read(*be, out),
                        std::vector<float>(batched.begin() + static_cast<long>(tok) * hd,
                                           batched.begin() + static_cast<long>(tok + 1) * hd)));
      }
      if (be != &ref) {  // the fast backend: the same bits at 1 and 3 threads
        if (first.empty())
          first = batched;
        else
          CHECK(same_bits(first, batched));
      }
    }
  }
}

TEST_CASE("quantized KV pools: what a block type cannot hold is refused", "[cpu]") {
  cpu::CpuBackend be;
  CHECK_THROWS_WITH(be.alloc(40, kQ8), "backend alloc: 40 q8_0 values, expected whole blocks of 32");
  const Buffer x = make(be, std::vector<float>(96, 0.5f));
  Buffer q8 = be.alloc(96, kQ8), f16 = be.alloc(96, BufferType::F16), q4 = be.alloc(192, kQ4);
  CHECK_THROWS_WITH(be.kv_store(x, x, make_ids(be, {0}), 1, 48, q8, f16),
                    "backend kv_store: a q8_0 pool holds blocks of 32 values; a row of 48 is not "
                    "a whole number of them (kv_dim 48)");
  CHECK_THROWS_WITH(be.kv_store(x, x, make_ids(be, {0}), 1, 96, q8, q4),
                    Catch::Contains("expected pools of equal size (f32, f16, q8_0 or q4_0)"));
  CHECK_NOTHROW(be.kv_store(x, x, make_ids(be, {0}), 1, 96, q8, f16));
  // Rows of 96 are whole blocks, heads of 48 are not.
  const Buffer table = make_ids(be, {0}), rows = make_ids(be, {0}), pos = make_ids(be, {0});
  const PagedKv kv{&q8, &f16, 1, &table, 1, &rows, &pos};
  Buffer out = be.alloc(96);
  CHECK_THROWS_WITH(be.attention(x, kv, 1, AttentionShape{2, 2, 48}, out),
                    "backend attention: a q8_0 pool holds blocks of 32 values; a head of 48 is "
                    "not a whole number of them (kv_dim 96)");
  CHECK_NOTHROW(be.attention(x, kv, 1, AttentionShape{3, 3, 32}, out));
}
