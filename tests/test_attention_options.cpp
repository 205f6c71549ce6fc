// Attention's per-layer options (backend.h AttentionShape: scale, softcap, window) on the CPU:
// the reference backend against softmax over the window of capped scores evaluated in double,
// with GQA, sequences longer than the window, a window of 1, f32 and f16 pools; the fast
// backend against the reference and alone vs batched; statistics over the capped, windowed
// scores; positions before the window never read (their blocks released); and the defaults
// (0, 0, 0) giving the bits of plain causal attention.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_fast_backend.h"
#include "core/error.h"
#include "core/softmax.h"
#include "support/backend_buffers.h"
#include "support/random_data.h"

using namespace llmctl;
using llmctl::test::make;
using llmctl::test::make_ids;
using llmctl::test::random_floats;
using llmctl::test::read;

namespace {

constexpr int64_t kBlock = 4;

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// One sequence of n_ctx positions, K/V rows from k/v, in blocks of 4 stored in reverse order
// in the pool; query tokens at `positions`. `table` may be edited (released blocks) before kv().
struct Cache {
  Buffer k_pool, v_pool, table_buf, seq, pos;
  std::vector<int32_t> table;
  PagedKv kv() const {
    return PagedKv{&k_pool, &v_pool, kBlock, &table_buf, static_cast<int64_t>(table.size()),
                   &seq,    &pos};
  }
};

Cache make_cache(Backend& be, const std::vector<float>& k, const std::vector<float>& v,
                 int64_t kv_dim, BufferType type, const std::vector<int32_t>& positions) {
  const int64_t n_ctx = static_cast<int64_t>(k.size()) / kv_dim;
  const int64_t n_blocks = (n_ctx + kBlock - 1) / kBlock;
  Cache c;
  c.k_pool = be.alloc(n_blocks * kBlock * kv_dim, type);
  c.v_pool = be.alloc(n_blocks * kBlock * kv_dim, type);
  std::vector<int32_t> slots;
  for (int64_t b = 0; b < n_blocks; ++b) c.table.push_back(static_cast<int32_t>(n_blocks - 1 - b));
  for (int64_t j = 0; j < n_ctx; ++j)
    slots.push_back(
        static_cast<int32_t>(c.table[static_cast<size_t>(j / kBlock)] * kBlock + j % kBlock));
  be.kv_store(make(be, k), make(be, v), make_ids(be, slots), n_ctx, kv_dim, c.k_pool, c.v_pool);
  c.table_buf = make_ids(be, c.table);
  c.seq = make_ids(be, std::vector<int32_t>(positions.size(), 0));
  c.pos = make_ids(be, positions);
  return c;
}

struct Problem {
  AttentionShape s;
  int64_t n_ctx;
  std::vector<int32_t> positions;
  std::vector<float> q, k, v;
  int64_t kv_dim() const { return s.n_kv_heads * s.head_dim; }
  int64_t n_tok() const { return static_cast<int64_t>(positions.size()); }
};

Problem make_problem(AttentionShape s, int64_t n_ctx, std::vector<int32_t> positions,
                     uint32_t seed) {
  std::mt19937 rng(seed);
  Problem p{s, n_ctx, std::move(positions), {}, {}, {}};
  p.q = random_floats(rng, static_cast<size_t>(p.n_tok() * s.n_heads * s.head_dim), 2.0f);
  p.k = random_floats(rng, static_cast<size_t>(n_ctx * p.kv_dim()), 2.0f);
  p.v = random_floats(rng, static_cast<size_t>(n_ctx * p.kv_dim()));
  return p;
}

struct Result {
  std::vector<float> out, stats;
};

Result run(Backend& be, const Problem& p, BufferType type, bool release_before_window = false) {
  Cache c = make_cache(be, p.k, p.v, p.kv_dim(), type, p.positions);
  if (release_before_window) {
    // Blocks wholly before every query's window: marked released (-1), as a cache that frees
    // them would; attention must not read them.
    int64_t lowest = std::numeric_limits<int64_t>::max();
    for (const int32_t pos : p.positions)
      lowest = std::min(lowest, attention_first_position(pos, p.s.window));
    int64_t released = 0;
    for (int64_t b = 0; (b + 1) * kBlock <= lowest; ++b, ++released)
      c.table[static_cast<size_t>(b)] = -1;
    CHECK(released >= 2);
    c.table_buf = make_ids(be, c.table);
  }
  const int64_t len = p.n_tok() * p.s.n_heads * p.s.head_dim;
  Buffer qb = make(be, p.q), out = be.alloc(len);
  Buffer stats = be.alloc(p.n_tok() * p.s.n_heads * kAttnStatFields);
  be.attention_with_stats(qb, c.kv(), p.n_tok(), p.s, out, stats);
  Result r{read(be, out), read(be, stats)};
  Buffer plain = be.alloc(len);
  be.attention(qb, c.kv(), p.n_tok(), p.s, plain);
  CHECK(same_bits(read(be, plain), r.out));  // stats never change out
  return r;
}

// Token t, head h in double: scores over positions j with p - j < window (all j <= p without
// one), scaled, capped, softmax, V; also the capped scores' max/min and the count.
struct Exact {
  std::vector<double> out;
  double max, min;
  int64_t count;
};

Exact exact(const Problem& p, size_t t, int64_t h) {
  const AttentionShape& s = p.s;
  const int64_t g = h / (s.n_heads / s.n_kv_heads), d = s.head_dim, pos = p.positions[t];
  const double scale = s.scale != 0.0f ? double{s.scale} : 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<double> sc;
  std::vector<int64_t> js;
  for (int64_t j = 0; j <= pos; ++j) {
    if (s.window > 0 && pos - j >= s.window) continue;  // llama.cpp: masked if p1 - p0 >= n_swa
    double dot = 0.0;
    for (int64_t i = 0; i < d; ++i)
      dot += double{p.q[(t * static_cast<size_t>(s.n_heads) + static_cast<size_t>(h)) *
                            static_cast<size_t>(d) +
                        static_cast<size_t>(i)]} *
             double{p.k[static_cast<size_t>(j * p.kv_dim() + g * d + i)]};
    double x = dot * scale;
    if (s.softcap > 0.0f) x = double{s.softcap} * std::tanh(x / double{s.softcap});
    sc.push_back(x);
    js.push_back(j);
  }
  Exact e{std::vector<double>(static_cast<size_t>(d), 0.0), -1e300, 1e300,
          static_cast<int64_t>(sc.size())};
  for (const double x : sc) e.max = std::max(e.max, x), e.min = std::min(e.min, x);
  double z = 0.0;
  for (const double x : sc) z += std::exp(x - e.max);
  for (size_t n = 0; n < sc.size(); ++n)
    for (int64_t i = 0; i < d; ++i)
      e.out[static_cast<size_t>(i)] +=
          std::exp(sc[n] - e.max) / z *
          double{p.v[static_cast<size_t>(js[n] * p.kv_dim() + g * d + i)]};
  return e;
}

AttentionShape with(AttentionShape s, float scale, float softcap, int32_t window) {
  s.scale = scale;
  s.softcap = softcap;
  s.window = window;
  return s;
}

}  // namespace

TEST_CASE("attention options: reference against the double formula (window, cap, scale, GQA)",
          "[cpu]") {
  // 4 query heads on 2 KV heads, 40 positions, queries early, mid and late (longer than every
  // window but 64), windows 1 to 64 and none, caps 0 / 50 / 2 (2 bends the scores hard).
  const AttentionShape base{4, 2, 8};
  const std::vector<int32_t> positions = {0, 3, 17, 39, 38};
  struct Options {
    float scale, softcap;
    int32_t window;
  };
  for (const Options o :
       {Options{0, 0, 1}, Options{0, 0, 3}, Options{0, 0, 16}, Options{0, 0, 64}, Options{0, 50, 0},
        Options{0, 2, 0}, Options{0.25f, 0, 0}, Options{0.0625f, 2, 5}, Options{0, 2, 1}}) {
    const Problem p = make_problem(with(base, o.scale, o.softcap, o.window), 40, positions, 31);
    for (const BufferType type : {BufferType::F32, BufferType::F16}) {
      INFO("scale " << o.scale << " softcap " << o.softcap << " window " << o.window << " "
                    << buffer_type_name(type));
      cpu::CpuBackend ref;
      const Result r = run(ref, p, type);
      // f32: dot products of 8 terms ~4 and f32 softmax: 2e-5; f16 rounds K and V (2^-11): 4e-3.
      const double tol = type == BufferType::F32 ? 2e-5 : 4e-3;
      for (size_t t = 0; t < positions.size(); ++t)
        for (int64_t h = 0; h < 4; ++h) {
          const Exact e = exact(p, t, h);
          const size_t row = t * 4 + static_cast<size_t>(h);
          for (int64_t i = 0; i < 8; ++i)
            CHECK(r.out[row * 8 + static_cast<size_t>(i)] ==
                  Approx(e.out[static_cast<size_t>(i)]).margin(tol));
          const float* st = r.stats.data() + row * kAttnStatFields;
          CHECK(st[kAttnStatCount] == static_cast<float>(e.count));
          if (type == BufferType::F32) {
            CHECK(st[kAttnStatMax] == Approx(e.max).margin(1e-4));
            CHECK(st[kAttnStatMin] == Approx(e.min).margin(1e-4));
          }
          if (o.softcap > 0.0f) CHECK(std::fabs(st[kAttnStatMax]) <= o.softcap);
        }
      // Window 1: each query sees only itself, so its output is its own V row, exactly (f32).
      if (o.window == 1 && type == BufferType::F32)
        for (size_t t = 0; t < positions.size(); ++t)
          for (int64_t h = 0; h < 4; ++h)
            for (int64_t i = 0; i < 8; ++i)
              CHECK(r.out[(t * 4 + static_cast<size_t>(h)) * 8 + static_cast<size_t>(i)] ==
                    p.v[static_cast<size_t>(positions[t] * 16 + (h / 2) * 8 + i)]);
    }
  }
}

TEST_CASE("attention options: fast agrees with the reference, never reads before the window",
          "[cpu]") {
  cpu::CpuBackend ref;
  cpu::CpuFastBackend fast(2);
  const std::vector<int32_t> positions = {0, 5, 33, 70, 71, 69};
  for (const AttentionShape& base :
       {AttentionShape{4, 2, 8}, AttentionShape{6, 2, 12}, AttentionShape{8, 8, 40}}) {
    for (const int32_t window : {0, 1, 4, 7, 32}) {
      for (const float softcap : {0.0f, 3.0f}) {
        const Problem p = make_problem(with(base, 0.0f, softcap, window), 72, positions, 41);
        for (const BufferType type : {BufferType::F32, BufferType::F16}) {
          INFO("heads " << base.n_heads << "/" << base.n_kv_heads << " d " << base.head_dim
                        << " window " << window << " softcap " << softcap << " "
                        << buffer_type_name(type));
          const Result a = run(ref, p, type), b = run(fast, p, type);
          // Same inputs; 8-lane fma sums and exp/tanh polynomials against scalar f32: 1e-5.
          for (size_t i = 0; i < a.out.size(); ++i)
            CHECK(b.out[i] == Approx(a.out[i]).margin(1e-5));
          for (size_t i = 0; i < a.stats.size(); ++i)
            CHECK(b.stats[i] == Approx(a.stats[i]).margin(1e-4).epsilon(1e-5));
          // Late queries only, blocks before all their windows released (positions 40 .. 71,
          // windows <= 32: blocks 0 and 1 at least): the same bits as with the blocks there.
          if (window > 0) {
            Problem late = p;
            late.positions = {40, 70, 71, 69};
            late.q.resize(4 * static_cast<size_t>(base.n_heads * base.head_dim));
            CHECK(same_bits(run(ref, late, type, true).out, run(ref, late, type).out));
            CHECK(same_bits(run(fast, late, type, true).out, run(fast, late, type).out));
          }
        }
      }
    }
  }
}

TEST_CASE("attention options: each token gets the bits it gets alone, at any thread count",
          "[cpu]") {
  const AttentionShape s = with(AttentionShape{4, 2, 8}, 0.2f, 4.0f, 5);
  const std::vector<int32_t> positions = {12, 3, 20, 19};
  const Problem p = make_problem(s, 21, positions, 51);
  cpu::CpuBackend ref;
  cpu::CpuFastBackend fast1(1), fast2(2);
  for (Backend* be : std::initializer_list<Backend*>{&ref, &fast1, &fast2}) {
    INFO(be->name() << " threads " << be->n_threads());
    const Result all = run(*be, p, BufferType::F16);
    for (size_t t = 0; t < positions.size(); ++t) {
      Problem one = p;
      one.positions = {positions[t]};
      one.q.assign(p.q.begin() + static_cast<long>(t * 32),
                   p.q.begin() + static_cast<long>((t + 1) * 32));
      const Result r = run(*be, one, BufferType::F16);
      CHECK(
          same_bits(r.out, std::vector<float>(all.out.begin() + static_cast<long>(t * 32),
                                              all.out.begin() + static_cast<long>((t + 1) * 32))));
      CHECK(same_bits(r.stats,
                      std::vector<float>(
                          all.stats.begin() + static_cast<long>(t * 4 * kAttnStatFields),
                          all.stats.begin() + static_cast<long>((t + 1) * 4 * kAttnStatFields))));
    }
  }
}

TEST_CASE("attention options: the defaults are plain causal attention, bit for bit", "[cpu]") {
  // scale 0 is 1/sqrt(head_dim) rounded to float; a window that covers every position is no
  // window; and the reference with all defaults computes exactly the loop it had before the
  // options (replayed here: f32 dot in order, times the scale, softmax_inplace, f32 sum of a V).
  const AttentionShape plain{4, 2, 12};
  const std::vector<int32_t> positions = {0, 9, 30, 31};
  const Problem p = make_problem(plain, 32, positions, 61);
  cpu::CpuBackend ref;
  cpu::CpuFastBackend fast(2);
  for (Backend* be : std::initializer_list<Backend*>{&ref, &fast}) {
    INFO(be->name() << (be == &ref ? " reference" : " fast"));
    const Result base = run(*be, p, BufferType::F16);
    Problem q = p;
    q.s = with(plain, static_cast<float>(1.0 / std::sqrt(12.0)), 0.0f, 32);
    const Result same = run(*be, q, BufferType::F16);
    CHECK(same_bits(base.out, same.out));
    CHECK(same_bits(base.stats, same.stats));
    q.s = with(plain, 0.0f, 0.0f, 31);  // position 31 now misses position 0
    CHECK(!same_bits(base.out, run(*be, q, BufferType::F16).out));
  }
  const Result got = run(ref, p, BufferType::F32);
  const float scale = static_cast<float>(1.0 / std::sqrt(12.0));
  for (size_t t = 0; t < positions.size(); ++t)
    for (int64_t h = 0; h < 4; ++h) {
      const int64_t g = h / 2, n_kv = positions[t] + 1;
      float sc[32];  // n_kv <= 32 (an array: GCC sees a vector's data() as possibly null)
      for (int64_t j = 0; j < n_kv; ++j) {
        float dot = 0.0f;
        for (int64_t i = 0; i < 12; ++i)
          dot += p.q[(t * 4 + static_cast<size_t>(h)) * 12 + static_cast<size_t>(i)] *
                 p.k[static_cast<size_t>(j * 24 + g * 12 + i)];
        sc[j] = dot * scale;
      }
      softmax_inplace(sc, n_kv);
      for (int64_t i = 0; i < 12; ++i) {
        float o = 0.0f;
        for (int64_t j = 0; j < n_kv; ++j)
          o += sc[j] * p.v[static_cast<size_t>(j * 24 + g * 12 + i)];
        CHECK(got.out[(t * 4 + static_cast<size_t>(h)) * 12 + static_cast<size_t>(i)] == o);
      }
    }
}

TEST_CASE("attention options: the seam refuses a negative or non-finite scale, cap or window",
          "[cpu]") {
  cpu::CpuBackend be;
  const Problem p = make_problem(AttentionShape{1, 1, 4}, 4, {3}, 71);
  Cache c = make_cache(be, p.k, p.v, 4, BufferType::F32, p.positions);
  Buffer q = make(be, p.q), out = be.alloc(4);
  const float inf = std::numeric_limits<float>::infinity();
  for (const AttentionShape& s : {with(p.s, -1.0f, 0, 0), with(p.s, std::nanf(""), 0, 0),
                                 with(p.s, 0, -2.0f, 0), with(p.s, 0, inf, 0), with(p.s, 0, 0, -1)})
    CHECK_THROWS_WITH(be.attention(q, c.kv(), 1, s, out),
                      Catch::Contains("expected finite scale and softcap >= 0 and window >= 0"));
}
