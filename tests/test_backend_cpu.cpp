// The scalar CPU backend op by op against direct double-precision formulas, batch invariance
// on every CPU backend, and the shared checks of the backend seam (backend.cpp).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_fast_backend.h"
#include "core/error.h"
#include "core/fp16.h"
#include "core/rope_math.h"
#include "core/softmax.h"
#include "quant/dequant.h"
#include "support/backend_buffers.h"
#include "support/random_data.h"

using namespace llmctl;
using llmctl::test::make;
using llmctl::test::make_ids;
using llmctl::test::random_floats;
using llmctl::test::read;

namespace {

WeightView f32_view(const std::string& name, const std::vector<float>& v, int64_t n_cols) {
  return WeightView{name, GgmlType::F32, n_cols, static_cast<int64_t>(v.size()) / n_cols, v.data()};
}

// Q8_0 blocks of `x` (a multiple of 32 long): d = amax / 127, q = round(x / d).
std::vector<uint8_t> quantize_q8_0(const std::vector<float>& x) {
  std::vector<uint8_t> out;
  for (size_t b = 0; b < x.size(); b += 32) {
    float amax = 0.0f;
    for (size_t j = 0; j < 32; ++j) amax = std::max(amax, std::abs(x[b + j]));
    const float d = amax / 127.0f;
    const uint16_t dh = f32_to_fp16(d);
    out.push_back(static_cast<uint8_t>(dh & 0xff));
    out.push_back(static_cast<uint8_t>(dh >> 8));
    for (size_t j = 0; j < 32; ++j) {
      const float q = d == 0.0f ? 0.0f : std::round(x[b + j] / d);
      out.push_back(static_cast<uint8_t>(static_cast<int8_t>(q)));
    }
  }
  return out;
}

}  // namespace

TEST_CASE("softmax: stable for large inputs, masked -inf gives 0", "[cpu]") {
  std::vector<float> x = {1000.0f, 1001.0f, 999.0f, -std::numeric_limits<float>::infinity()};
  softmax_inplace(x.data(), 4);
  const double e = std::exp(1.0);
  const double z = 1.0 + e + 1.0 / e;
  CHECK(x[0] == Approx(1.0 / z).epsilon(1e-6));
  CHECK(x[1] == Approx(e / z).epsilon(1e-6));
  CHECK(x[2] == Approx(1.0 / e / z).epsilon(1e-6));
  CHECK(x[3] == 0.0f);
  std::vector<float> one = {-5.0f};
  softmax_inplace(one.data(), 1);
  CHECK(one[0] == 1.0f);
}

TEST_CASE("rope: angles, normal and neox pairing, partial rotary, linear scaling", "[cpu]") {
  // theta = p * freq_scale * base^(-2i / n_rot)
  CHECK(rope_theta(0, 3, 8, 10000.0, 1.0) == 0.0);
  CHECK(rope_theta(7, 0, 8, 10000.0, 1.0) == 7.0);
  CHECK(rope_theta(5, 1, 8, 10000.0, 1.0) == Approx(5.0 * std::pow(10000.0, -0.25)));
  CHECK(rope_theta(8, 1, 8, 10000.0, 0.25) == Approx(2.0 * std::pow(10000.0, -0.25)));

  cpu::CpuBackend be;
  std::mt19937 rng(7);
  const int64_t n_heads = 2, head_dim = 8;
  const std::vector<float> x0 = random_floats(rng, 16);
  for (RopeType type : {RopeType::Normal, RopeType::Neox}) {
    for (int64_t n_rot : {int64_t{8}, int64_t{4}}) {
      RopeParams p{type, head_dim, n_rot, 10000.0, 0.5, {}};
      Buffer x = make(be, x0);
      const int64_t pos = 37;
      be.rope(x, make_ids(be, {pos}), 1, n_heads, p);
      const std::vector<float> got = read(be, x);
      for (int64_t h = 0; h < n_heads; ++h) {
        std::vector<double> want(x0.begin() + h * head_dim, x0.begin() + (h + 1) * head_dim);
        for (int64_t i = 0; i < n_rot / 2; ++i) {
          const int64_t a = type == RopeType::Normal ? 2 * i : i;
          const int64_t b = type == RopeType::Normal ? 2 * i + 1 : i + n_rot / 2;
          const double th =
              static_cast<double>(pos) * 0.5 *
              std::pow(10000.0, -2.0 * static_cast<double>(i) / static_cast<double>(n_rot));
          const double xa = want[static_cast<size_t>(a)], xb = want[static_cast<size_t>(b)];
          want[static_cast<size_t>(a)] = xa * std::cos(th) - xb * std::sin(th);
          want[static_cast<size_t>(b)] = xa * std::sin(th) + xb * std::cos(th);
        }
        for (int64_t j = 0; j < head_dim; ++j)
          CHECK(got[static_cast<size_t>(h * head_dim + j)] ==
                Approx(want[static_cast<size_t>(j)]).margin(1e-6));
      }
    }
  }
}

// K/V rows of positions 0 .. n-1 of one sequence, scattered over pool blocks in the order
// `blocks` (block size 2), and the matching PagedKv for query tokens at `positions`.
struct PagedFixture {
  Buffer k_pool, v_pool, table, seq_rows, pos;
  PagedKv kv() const { return PagedKv{&k_pool, &v_pool, 2, &table, 3, &seq_rows, &pos}; }
};

PagedFixture paged(Backend& be, const std::vector<float>& k, const std::vector<float>& v,
                   int64_t kv_dim, const std::vector<int32_t>& positions, BufferType type) {
  const std::vector<int32_t> blocks = {2, 0, 3};  // positions 0-1 in block 2, 2-3 in 0, 4-5 in 3
  const int64_t n = static_cast<int64_t>(k.size()) / kv_dim;
  PagedFixture f;
  f.k_pool = be.alloc(4 * 2 * kv_dim, type);
  f.v_pool = be.alloc(4 * 2 * kv_dim, type);
  Buffer kb = make(be, k), vb = make(be, v);
  std::vector<int32_t> slots;
  for (int64_t j = 0; j < n; ++j)
    slots.push_back(blocks[static_cast<size_t>(j / 2)] * 2 + static_cast<int32_t>(j % 2));
  be.kv_store(kb, vb, make_ids(be, slots), n, kv_dim, f.k_pool, f.v_pool);
  f.table = make_ids(be, blocks);
  f.seq_rows = make_ids(be, std::vector<int32_t>(positions.size(), 0));
  f.pos = make_ids(be, positions);
  return f;
}

TEST_CASE("rope: per-pair frequency divisors (Llama 3.1 rope_freqs)", "[cpu]") {
  // Divisors of 2 on every pair are the same angles as linear scaling by 2.
  cpu::CpuBackend be;
  std::mt19937 rng(9);
  const std::vector<float> x0 = random_floats(rng, 8);
  const std::vector<float> twos(4, 2.0f), mixed = {1.0f, 4.0f, 1.0f, 1.0f};
  Buffer a = make(be, x0), b = make(be, x0), c = make(be, x0);
  const Buffer pos = make_ids(be, {11});
  be.rope(a, pos, 1, 1, RopeParams{RopeType::Normal, 8, 8, 10000.0, 0.5, {}});
  be.rope(b, pos, 1, 1, RopeParams{RopeType::Normal, 8, 8, 10000.0, 1.0, f32_view("f", twos, 4)});
  CHECK(read(be, a) == read(be, b));
  // Only pair 1 changes when only its divisor does.
  be.rope(c, pos, 1, 1, RopeParams{RopeType::Normal, 8, 8, 10000.0, 1.0, f32_view("f", mixed, 4)});
  Buffer d = make(be, x0);
  be.rope(d, pos, 1, 1, RopeParams{RopeType::Normal, 8, 8, 10000.0, 1.0, {}});
  const std::vector<float> got_c = read(be, c), got_d = read(be, d);
  for (size_t i = 0; i < 8; ++i) {
    if (i == 2 || i == 3)
      CHECK(got_c[i] != got_d[i]);
    else
      CHECK(got_c[i] == got_d[i]);
  }
  const std::vector<float> wrong(3, 1.0f);
  CHECK_THROWS_WITH(be.rope(c, pos, 1, 1,
                            RopeParams{RopeType::Normal, 8, 8, 10000.0, 1.0,
                                       f32_view("rope_freqs.weight", wrong, 3)}),
                    "backend rope: weight 'rope_freqs.weight' has shape [3, 1], expected [4]");
}

TEST_CASE("rope: angles kept across calls give a direct computation's bits", "[cpu]") {
  // The backends keep cos/sin per (position, pair) between calls (cpu/rope_table.h). Against
  // rope_math.h computed here for every call: two parameter sets interleaved (Gemma 3's local
  // and global bases), positions in any order and past the table's cap, divisors changed in
  // place at the same address, on both CPU backends.
  std::mt19937 rng(21);
  std::vector<float> factors = {1.0f, 2.0f, 4.0f, 8.0f};
  const auto direct = [&](std::vector<float> x, const std::vector<int32_t>& pos, int64_t n_heads,
                          const RopeParams& p) {
    for (size_t t = 0; t < pos.size(); ++t)
      for (int64_t h = 0; h < n_heads; ++h)
        for (int64_t i = 0; i < p.n_rot / 2; ++i) {
          const double f =
              p.freq_factors.present() ? static_cast<double>(factors[static_cast<size_t>(i)]) : 1.0;
          const double theta = rope_angle(pos[t], i, p.n_rot, p.freq_base, p.freq_scale, f,
                                          p.ext_factor, p.yarn_low, p.yarn_high);
          int64_t i0 = 0, i1 = 0;
          rope_pair_index(p.type, i, p.n_rot, &i0, &i1);
          float* head = x.data() + (static_cast<int64_t>(t) * n_heads + h) * p.head_dim;
          rope_rotate_cs(head + i0, head + i1, static_cast<float>(std::cos(theta) * p.mscale),
                         static_cast<float>(std::sin(theta) * p.mscale));
        }
    return x;
  };
  RopeParams local{RopeType::Neox, 8, 8, 10000.0, 1.0, {}};
  RopeParams global{RopeType::Normal, 8, 8, 1000000.0, 0.125, {}};
  RopeParams yarn = global;
  yarn.ext_factor = 1.0;
  yarn.yarn_low = 1.0;
  yarn.yarn_high = 3.0;
  yarn.mscale = 1.1;
  RopeParams divided{RopeType::Normal, 8, 8, 10000.0, 1.0, f32_view("f", factors, 4)};
  const std::vector<std::vector<int32_t>> batches = {
      {0, 1, 2}, {7}, {2, 0, 5000000}, {3, 3, 1}, {5000000, 4}, {1, 2, 3, 4, 5}};
  cpu::CpuBackend ref;
  cpu::CpuFastBackend fast(2);
  for (Backend* be : {static_cast<Backend*>(&ref), static_cast<Backend*>(&fast)}) {
    INFO(be->name());
    int round = 0;
    for (const std::vector<int32_t>& pos : batches)
      for (const RopeParams* p : {&local, &global, &yarn, &divided, &local}) {
        INFO("round " << round++);
        if (round == 17) factors[2] = 3.0f;  // same address, new values
        const int64_t n = static_cast<int64_t>(pos.size()), n_heads = 2;
        const std::vector<float> x = random_floats(rng, static_cast<size_t>(n * n_heads * 8));
        Buffer b = make(*be, x);
        be->rope(b, make_ids(*be, pos), n, n_heads, *p);
        CHECK(read(*be, b) == direct(x, pos, n_heads, *p));
      }
  }
}

TEST_CASE("attention over a paged cache: causal GQA against a direct double formula", "[cpu]") {
  cpu::CpuBackend be;
  std::mt19937 rng(3);
  const AttentionShape s{4, 2, 8};  // 4 query heads share 2 kv heads
  const int64_t n_ctx = 6, kv_dim = 16;
  const std::vector<float> k = random_floats(rng, static_cast<size_t>(n_ctx * kv_dim));
  const std::vector<float> v = random_floats(rng, static_cast<size_t>(n_ctx * kv_dim));
  // Three query tokens of one sequence at positions 4, 0 and 5 (a prefill chunk, reordered).
  const std::vector<int32_t> positions = {4, 0, 5};
  const std::vector<float> q = random_floats(rng, 3 * 32);
  for (BufferType type : {BufferType::F32, BufferType::F16}) {
    INFO(buffer_type_name(type));
    const PagedFixture f = paged(be, k, v, kv_dim, positions, type);
    Buffer qb = make(be, q), out = be.alloc(3 * 32);
    be.attention(qb, f.kv(), 3, s, out);
    const std::vector<float> got = read(be, out);
    // f16 storage rounds K and V to 11 significant bits: ~5e-4 relative.
    const double tol = type == BufferType::F32 ? 1e-5 : 3e-3;
    for (size_t t = 0; t < 3; ++t) {
      const int64_t n_kv = positions[t] + 1;
      for (int64_t h = 0; h < 4; ++h) {
        const int64_t g = h / 2;
        std::vector<double> sc(static_cast<size_t>(n_kv));
        double mx = -1e300, sum = 0.0;
        for (int64_t j = 0; j < n_kv; ++j) {
          double dot = 0.0;
          for (int64_t i = 0; i < 8; ++i)
            dot += static_cast<double>(q[t * 32 + static_cast<size_t>(h * 8 + i)]) *
                   static_cast<double>(k[static_cast<size_t>(j * kv_dim + g * 8 + i)]);
          sc[static_cast<size_t>(j)] = dot / std::sqrt(8.0);
          mx = std::max(mx, sc[static_cast<size_t>(j)]);
        }
        for (double& x : sc) sum += (x = std::exp(x - mx));
        for (int64_t i = 0; i < 8; ++i) {
          double o = 0.0;
          for (int64_t j = 0; j < n_kv; ++j)
            o += sc[static_cast<size_t>(j)] / sum *
                 static_cast<double>(v[static_cast<size_t>(j * kv_dim + g * 8 + i)]);
          CHECK(got[t * 32 + static_cast<size_t>(h * 8 + i)] == Approx(o).margin(tol));
        }
      }
    }
    // Position 0 sees one row: the output is that value row, whatever the scores.
    if (type == BufferType::F32) {
      CHECK(got[32 + 8] == Approx(v[0]).margin(1e-6));   // token 1, head 1 -> kv head 0
      CHECK(got[32 + 16] == Approx(v[8]).margin(1e-6));  // token 1, head 2 -> kv head 1
    }
  }
}

TEST_CASE("fast attention agrees with the reference (f32 and f16 pools, head_dim tails)", "[cpu]") {
  std::mt19937 rng(21);
  cpu::CpuBackend ref;
  cpu::CpuFastBackend fast(2);
  for (int64_t head_dim : {int64_t{8}, int64_t{12}, int64_t{3}}) {
    const AttentionShape s{4, 2, head_dim};
    const int64_t kv_dim = 2 * head_dim;
    const std::vector<float> k = random_floats(rng, static_cast<size_t>(6 * kv_dim));
    const std::vector<float> v = random_floats(rng, static_cast<size_t>(6 * kv_dim));
    const std::vector<float> q = random_floats(rng, static_cast<size_t>(3 * 4 * head_dim));
    const std::vector<int32_t> positions = {5, 0, 3};
    for (BufferType type : {BufferType::F32, BufferType::F16}) {
      INFO("head_dim " << head_dim << " " << buffer_type_name(type));
      std::vector<float> got[2];
      int i = 0;
      for (Backend* be : std::initializer_list<Backend*>{&ref, &fast}) {
        const PagedFixture f = paged(*be, k, v, kv_dim, positions, type);
        Buffer qb = make(*be, q), out = be->alloc(static_cast<int64_t>(q.size()));
        be->attention(qb, f.kv(), 3, s, out);
        got[i++] = read(*be, out);
      }
      // Same inputs (the f16 rows are rounded identically); only the summation order differs.
      for (size_t j = 0; j < got[0].size(); ++j) CHECK(got[1][j] == Approx(got[0][j]).margin(1e-5));
    }
  }
}

TEST_CASE("batched ops give each token the bits it gets alone, on every CPU backend", "[cpu]") {
  std::mt19937 rng(5);
  const int64_t n = 64, d = 48, kv_dim = 16;
  const AttentionShape s{4, 2, 8};
  const std::vector<float> w = random_floats(rng, static_cast<size_t>(n * d));
  const std::vector<float> x = random_floats(rng, static_cast<size_t>(3 * n));
  const std::vector<float> k = random_floats(rng, static_cast<size_t>(6 * kv_dim));
  const std::vector<float> v = random_floats(rng, static_cast<size_t>(6 * kv_dim));
  const std::vector<float> q = random_floats(rng, 3 * 32);
  const std::vector<int32_t> positions = {5, 2, 3};
  cpu::CpuBackend ref;
  cpu::CpuFastBackend fast1(1), fast2(2);
  for (Backend* be : std::initializer_list<Backend*>{&ref, &fast1, &fast2}) {
    INFO(be->name() << " threads " << be->n_threads());
    Buffer xb = make(*be, x), all = be->alloc(3 * d);
    be->matmul(f32_view("w", w, n), xb, 3, all);
    const std::vector<float> batched = read(*be, all);
    const PagedFixture f = paged(*be, k, v, kv_dim, positions, BufferType::F16);
    Buffer qb = make(*be, q), att = be->alloc(3 * 32);
    be->attention(qb, f.kv(), 3, s, att);
    const std::vector<float> att_batched = read(*be, att);
    for (size_t t = 0; t < 3; ++t) {
      Buffer xt = make(*be, std::vector<float>(x.begin() + static_cast<long>(t * n),
                                               x.begin() + static_cast<long>((t + 1) * n)));
      Buffer one = be->alloc(d);
      be->matmul(f32_view("w", w, n), xt, 1, one);
      CHECK(read(*be, one) == std::vector<float>(batched.begin() + static_cast<long>(t * d),
                                                 batched.begin() + static_cast<long>((t + 1) * d)));
      const PagedFixture ft = paged(*be, k, v, kv_dim, {positions[t]}, BufferType::F16);
      Buffer qt = make(*be, std::vector<float>(q.begin() + static_cast<long>(t * 32),
                                               q.begin() + static_cast<long>((t + 1) * 32)));
      Buffer at = be->alloc(32);
      be->attention(qt, ft.kv(), 1, s, at);
      CHECK(read(*be, at) ==
            std::vector<float>(att_batched.begin() + static_cast<long>(t * 32),
                               att_batched.begin() + static_cast<long>((t + 1) * 32)));
    }
  }
}

TEST_CASE("matmul, get_rows: quantized weights equal their dequantized F32 rows", "[cpu]") {
  cpu::CpuBackend be;
  std::mt19937 rng(11);
  const int64_t n = 64, d = 5;
  const std::vector<float> w = random_floats(rng, static_cast<size_t>(n * d));
  const std::vector<float> xv = random_floats(rng, static_cast<size_t>(n));
  Buffer x = make(be, xv), out = be.alloc(d);

  // F32: against a double dot product.
  be.matmul(f32_view("w", w, n), x, 1, out);
  std::vector<float> got = read(be, out);
  for (int64_t r = 0; r < d; ++r) {
    double dot = 0.0;
    for (int64_t i = 0; i < n; ++i)
      dot += static_cast<double>(w[static_cast<size_t>(r * n + i)]) *
             static_cast<double>(xv[static_cast<size_t>(i)]);
    CHECK(got[static_cast<size_t>(r)] == Approx(dot).margin(1e-5));
  }

  // Q8_0 and F16: exactly the F32 matmul of the dequantized weight (same order of sums).
  const std::vector<uint8_t> q8 = quantize_q8_0(w);
  std::vector<uint8_t> f16(w.size() * 2);
  for (size_t i = 0; i < w.size(); ++i) {
    const uint16_t h = f32_to_fp16(w[i]);
    std::memcpy(f16.data() + 2 * i, &h, 2);
  }
  const std::pair<GgmlType, const std::vector<uint8_t>*> cases[] = {{GgmlType::Q8_0, &q8},
                                                                    {GgmlType::F16, &f16}};
  for (const auto& [type, bytes] : cases) {
    INFO(ggml_type_name(type));
    std::vector<float> deq(w.size());
    dequantize_row(type, bytes->data(), deq.data(), n * d);
    Buffer ref_out = be.alloc(d);
    be.matmul(f32_view("deq", deq, n), x, 1, ref_out);
    be.matmul(WeightView{"q", type, n, d, bytes->data()}, x, 1, out);
    CHECK(read(be, out) == read(be, ref_out));

    Buffer rows = be.alloc(2 * n);
    be.get_rows(WeightView{"q", type, n, d, bytes->data()}, make_ids(be, {3, 0}), 2, rows);
    const std::vector<float> got_rows = read(be, rows);
    CHECK(std::vector<float>(got_rows.begin(), got_rows.begin() + n) ==
          std::vector<float>(deq.begin() + 3 * n, deq.begin() + 4 * n));
    CHECK(std::vector<float>(got_rows.begin() + n, got_rows.end()) ==
          std::vector<float>(deq.begin(), deq.begin() + n));
  }
}

TEST_CASE("rmsnorm, silu_mul, add, add_bias, copy_rows", "[cpu]") {
  cpu::CpuBackend be;
  const std::vector<float> xv = {1.0f, -2.0f, 3.0f, 0.5f, 2.0f, 2.0f, 2.0f, 2.0f};
  const std::vector<float> wv = {1.0f, 0.5f, 2.0f, -1.0f};
  Buffer x = make(be, xv), out = be.alloc(8);
  be.rmsnorm(x, f32_view("norm", wv, 4), 1e-5f, 2, out);
  const double ms0 = (1.0 + 4.0 + 9.0 + 0.25) / 4.0, ms1 = 4.0;
  const std::vector<float> got = read(be, out);
  for (size_t i = 0; i < 4; ++i) {
    CHECK(got[i] ==
          Approx(static_cast<double>(xv[i] * wv[i]) / std::sqrt(ms0 + 1e-5)).epsilon(1e-6));
    CHECK(got[4 + i] ==
          Approx(static_cast<double>(xv[4 + i] * wv[i]) / std::sqrt(ms1 + 1e-5)).epsilon(1e-6));
  }
  Buffer picked = be.alloc(4);
  be.copy_rows(x, 4, make_ids(be, {1}), 1, picked);
  CHECK(read(be, picked) == std::vector<float>{2.0f, 2.0f, 2.0f, 2.0f});
  CHECK_THROWS_WITH(be.copy_rows(x, 4, make_ids(be, {2}), 1, picked),
                    "backend copy_rows: row 2 is outside [0, 2)");

  Buffer g = make(be, {0.0f, 1.0f, -3.0f}), u = make(be, {5.0f, 2.0f, 1.0f}), o = be.alloc(3);
  be.silu_mul(g, u, 3, o);
  const std::vector<float> s = read(be, o);
  CHECK(s[0] == 0.0f);
  CHECK(s[1] == Approx(2.0 / (1.0 + std::exp(-1.0))).epsilon(1e-6));
  CHECK(s[2] == Approx(-3.0 / (1.0 + std::exp(3.0))).epsilon(1e-6));

  be.add(g, u, 3);
  CHECK(read(be, g) == std::vector<float>{5.0f, 3.0f, -2.0f});
  const std::vector<float> bias = {1.0f, 1.0f, 1.0f};
  be.add_bias(g, f32_view("bias", bias, 3), 1);
  CHECK(read(be, g) == std::vector<float>{6.0f, 4.0f, -1.0f});
}

TEST_CASE("backend checks: shapes, ids and dtypes are refused with what was expected", "[cpu]") {
  cpu::CpuBackend be;
  const std::vector<float> w(12, 1.0f);
  Buffer x3 = be.alloc(3), x4 = be.alloc(4), out3 = be.alloc(3);
  const WeightView w43 = f32_view("blk.0.attn_q.weight", w, 4);  // (3 rows, 4 cols)
  CHECK_THROWS_WITH(be.matmul(w43, x3, 1, out3),
                    "backend matmul: x has 3 elements, expected at least 4");
  CHECK_THROWS_WITH(be.matmul(w43, x4, 2, out3),
                    "backend matmul: x has 4 elements, expected at least 8");
  CHECK_THROWS_WITH(be.matmul(w43, x4, 1, x4), "backend matmul: x and out must not alias");
  CHECK_THROWS_WITH(be.matmul(w43, x4, 0, out3), "backend matmul: n_tokens 0, expected at least 1");
  CHECK_THROWS_WITH(be.get_rows(w43, make_ids(be, {3}), 1, x4),
                    "backend get_rows: id 3 is outside 'blk.0.attn_q.weight' rows [0, 3)");
  CHECK_THROWS_WITH(be.get_rows(w43, make_ids(be, {-1}), 1, x4),
                    "backend get_rows: id -1 is outside 'blk.0.attn_q.weight' rows [0, 3)");
  CHECK_THROWS_WITH(be.get_rows(w43, x4, 1, x4), "backend get_rows: ids is f32, expected i32");
  WeightView iq2{"t", GgmlType::IQ2_XXS, 256, 1, w.data()};
  CHECK_THROWS_WITH(be.matmul(iq2, x4, 1, out3),
                    "backend matmul: weight 't' has type IQ2_XXS, expected one of F32, F16, BF16, "
                    "Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, "
                    "MXFP4");
  WeightView q8{"t", GgmlType::Q8_0, 4, 3, w.data()};
  CHECK_THROWS_WITH(
      be.matmul(q8, x4, 1, out3),
      "backend matmul: weight 't' rows of 4 elements are not whole Q8_0 blocks of 32");
  CHECK_THROWS_WITH(be.rmsnorm(x3, w43, 1e-5f, 1, out3),
                    "backend rmsnorm: weight 'blk.0.attn_q.weight' has shape [4, 3], expected [4]");
  CHECK_THROWS_WITH(
      be.rope(x4, make_ids(be, {0}), 1, 1, RopeParams{RopeType::Normal, 4, 3, 10000.0, 1.0, {}}),
      "backend rope: n_rot 3 must be even and in (0, head_dim 4]");
  CHECK_THROWS_WITH(
      be.rope(x4, make_ids(be, {-2}), 1, 1, RopeParams{RopeType::Normal, 4, 4, 10000.0, 1.0, {}}),
      "backend rope: position -2 is negative");
  Buffer pool = be.alloc(8), pool16 = be.alloc(16, BufferType::F16);
  CHECK_THROWS_WITH(be.kv_store(x4, x4, make_ids(be, {0}), 1, 4, pool, pool16),
                    Catch::Contains("expected pools of equal size"));
  const Buffer table = make_ids(be, {0}), rows = make_ids(be, {0}), pos = make_ids(be, {0});
  const PagedKv kv{&pool, &pool, 2, &table, 1, &rows, &pos};
  CHECK_THROWS_WITH(be.attention(x4, kv, 1, AttentionShape{2, 3, 2}, x4),
                    Catch::Contains("n_kv_heads dividing n_heads"));
  const PagedKv bad_block{&pool, &pool, 3, &table, 1, &rows, &pos};
  CHECK_THROWS_WITH(be.attention(x4, bad_block, 1, AttentionShape{1, 1, 4}, x4),
                    Catch::Contains("whole blocks of 3 rows of 4"));
  CHECK_THROWS_WITH(be.alloc(0), "backend alloc: 0 elements, expected at least 1");
  CHECK_THROWS_WITH(be.add(x3, x4, 4), "backend add: x has 3 elements, expected at least 4");
  CHECK_THROWS_WITH(x4.i32(), "backend buffer: f32 elements used as i32");
}
