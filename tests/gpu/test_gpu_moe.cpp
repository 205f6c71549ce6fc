// The mixture-of-experts ops on the CUDA backend against the CPU reference backend
// (backend/cpu/moe_cpu.cpp), backend.h "mixture of experts":
//   moe_route           ids equal, weights within 8 ulp (expf against glibc's exp, then a
//                       product, a k-term sum and a division), NaN rows NaN on both; shapes of
//                       Mixtral (top-2 of 8), Qwen2-MoE (top-4 of 60), Qwen3-MoE (top-8 of
//                       128), k = n_expert and k = 1; rows of exact ties (lower expert first),
//                       -inf logits, a NaN logit
//   moe_gather, moe_scatter, moe_combine   bit for bit (copies; products rounded, no FMA)
//   sigmoid_scale_rows  within 1e-6 relative (expf)
// and a bad slot reported at the next sync. Runs only where a GPU is visible.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "backend_pair.h"

using namespace llmctl;
using llmctl::test::fetch;
using llmctl::test::fetch_i32;
using llmctl::test::make_f32;
using llmctl::test::make_i32;
using llmctl::test::random_floats;
using llmctl::test::same_bits;

namespace {

struct Fixture {
  cpu::CpuBackend cpu;
  cuda::CudaBackend gpu{0};
};

// Distance in units in the last place between two finite floats of the same sign.
int64_t ulp_distance(float a, float b) {
  int32_t ia = 0, ib = 0;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  return std::abs(static_cast<int64_t>(ia) - static_cast<int64_t>(ib));
}

// Random logits in [-4, 4) with special rows: row 1 all equal (ties: experts 0, 1, ... in
// order), row 2 half of its experts sharing the row's largest value, row 3 with -inf logits
// (probability 0), row 4 with one NaN (every probability NaN, as core/softmax.h gives).
std::vector<float> router_logits(int64_t n_tokens, int64_t n_expert, uint64_t seed) {
  auto v = random_floats(static_cast<size_t>(n_tokens * n_expert), seed, -4.0f, 4.0f);
  auto row = [&](int64_t t) { return v.begin() + t * n_expert; };
  if (n_tokens > 1) std::fill(row(1), row(1) + n_expert, 0.5f);
  if (n_tokens > 2)
    for (int64_t e = 0; e < n_expert; e += 2) row(2)[e] = 4.0f;
  if (n_tokens > 3)
    for (int64_t e = 1; e < n_expert; e += 3) row(3)[e] = -std::numeric_limits<float>::infinity();
  if (n_tokens > 4) row(4)[n_expert / 2] = std::numeric_limits<float>::quiet_NaN();
  return v;
}

// The slots (t * k + r) of every expert in turn, as the engine orders them: expert e's slots
// are slots[first[e] .. first[e + 1]).
struct SortedSlots {
  std::vector<int32_t> slots;
  std::vector<int64_t> first;
};
SortedSlots sort_by_expert(const std::vector<int32_t>& ids, int64_t n_expert) {
  SortedSlots s;
  for (int64_t e = 0; e < n_expert; ++e) {
    s.first.push_back(static_cast<int64_t>(s.slots.size()));
    for (size_t i = 0; i < ids.size(); ++i)
      if (ids[i] == e) s.slots.push_back(static_cast<int32_t>(i));
  }
  s.first.push_back(static_cast<int64_t>(s.slots.size()));
  return s;
}

std::vector<int32_t> random_ids(int64_t n, int64_t n_expert, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(n_expert - 1));
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int32_t& id : ids) id = pick(rng);
  return ids;
}

}  // namespace

TEST_CASE("cuda supports the mixture-of-experts ops", "[gpu]") {
  Fixture f;
  CHECK(f.gpu.supports_moe());
}

TEST_CASE("cuda moe_route equals the CPU: ids exactly, weights within 8 ulp", "[gpu]") {
  Fixture f;
  struct Shape {
    int64_t n_expert, k;
  };
  const Shape shapes[] = {{8, 2}, {60, 4}, {128, 8}, {1, 1}, {33, 33}, {256, 1}, {7, 3}};
  for (const Shape s : shapes) {
    for (const int64_t n_tokens : {1, 5, 67}) {
      for (const bool normalize : {false, true}) {
        CAPTURE(s.n_expert, s.k, n_tokens, normalize);
        const auto logits = router_logits(n_tokens, s.n_expert,
                                          static_cast<uint64_t>(s.n_expert * 1000 + n_tokens));
        const int64_t n = n_tokens * s.k;
        Buffer cl = make_f32(f.cpu, logits), gl = make_f32(f.gpu, logits);
        Buffer ci = f.cpu.alloc(n, BufferType::I32), cw = f.cpu.alloc(n);
        Buffer gi = f.gpu.alloc(n, BufferType::I32), gw = f.gpu.alloc(n);
        f.cpu.moe_route(cl, n_tokens, s.n_expert, s.k, normalize, ci, cw);
        f.gpu.moe_route(gl, n_tokens, s.n_expert, s.k, normalize, gi, gw);
        CHECK(fetch_i32(f.gpu, gi, n) == fetch_i32(f.cpu, ci, n));
        const auto want = fetch(f.cpu, cw, n), got = fetch(f.gpu, gw, n);
        for (size_t i = 0; i < want.size(); ++i) {
          CAPTURE(i, want[i], got[i]);
          if (std::isnan(want[i]))
            CHECK(std::isnan(got[i]));
          else
            CHECK(ulp_distance(got[i], want[i]) <= 8);
        }
      }
    }
  }
}

TEST_CASE("cuda moe_gather, moe_scatter and moe_combine equal the CPU bit for bit", "[gpu]") {
  Fixture f;
  for (const int64_t n_cols : llmctl::test::odd_lengths()) {
    for (const int64_t n_tokens : {1, 3, 40}) {
      for (const int64_t k : {1, 2, 8}) {
        const int64_t n_expert = 8;
        CAPTURE(n_cols, n_tokens, k);
        const int64_t n_slots = n_tokens * k;
        const auto x = random_floats(static_cast<size_t>(n_tokens * n_cols), 11, -3, 3);
        const SortedSlots s =
            sort_by_expert(random_ids(n_slots, n_expert, static_cast<uint64_t>(n_slots)), n_expert);
        Buffer cx = make_f32(f.cpu, x), gx = make_f32(f.gpu, x);
        Buffer cs = make_i32(f.cpu, s.slots), gs = make_i32(f.gpu, s.slots);
        // Every expert's rows gathered, then (as if its FFN were the identity) scattered back:
        // slot t * k + r must then hold x row t.
        const std::vector<float> zeros(static_cast<size_t>(n_slots * n_cols), 0.0f);
        Buffer cys = make_f32(f.cpu, zeros), gys = make_f32(f.gpu, zeros);
        for (int64_t e = 0; e < n_expert; ++e) {
          const int64_t m = s.first[static_cast<size_t>(e) + 1] - s.first[static_cast<size_t>(e)];
          if (m == 0) continue;
          const int64_t offset = s.first[static_cast<size_t>(e)];
          Buffer co = f.cpu.alloc(m * n_cols), go = f.gpu.alloc(m * n_cols);
          f.cpu.moe_gather(cx, n_cols, cs, offset, m, k, co);
          f.gpu.moe_gather(gx, n_cols, gs, offset, m, k, go);
          CHECK(same_bits(fetch(f.gpu, go, m * n_cols), fetch(f.cpu, co, m * n_cols)));
          f.cpu.moe_scatter(co, n_cols, cs, offset, m, cys);
          f.gpu.moe_scatter(go, n_cols, gs, offset, m, gys);
        }
        const auto ys = fetch(f.gpu, gys, n_slots * n_cols);
        CHECK(same_bits(ys, fetch(f.cpu, cys, n_slots * n_cols)));
        bool round_trip = true;
        for (int64_t slot = 0; slot < n_slots; ++slot)
          round_trip = round_trip && std::memcmp(ys.data() + slot * n_cols,
                                                 x.data() + (slot / k) * n_cols,
                                                 static_cast<size_t>(n_cols) * sizeof(float)) == 0;
        CHECK(round_trip);

        // combine over random slot rows and weights: any FMA or other order changes bits.
        const auto y = random_floats(static_cast<size_t>(n_slots * n_cols), 5, -2, 2);
        const auto w = random_floats(static_cast<size_t>(n_slots), 6, 0, 1);
        Buffer cy = make_f32(f.cpu, y), gy = make_f32(f.gpu, y);
        Buffer cw = make_f32(f.cpu, w), gw = make_f32(f.gpu, w);
        Buffer co = f.cpu.alloc(n_tokens * n_cols), go = f.gpu.alloc(n_tokens * n_cols);
        f.cpu.moe_combine(cy, cw, n_tokens, k, n_cols, co);
        f.gpu.moe_combine(gy, gw, n_tokens, k, n_cols, go);
        CHECK(same_bits(fetch(f.gpu, go, n_tokens * n_cols), fetch(f.cpu, co, n_tokens * n_cols)));
      }
    }
  }
}

TEST_CASE("cuda sigmoid_scale_rows equals the CPU within 1e-6 relative", "[gpu]") {
  Fixture f;
  for (const int64_t n_cols : llmctl::test::odd_lengths()) {
    for (const int64_t n_tokens : {1, 3, 17}) {
      CAPTURE(n_cols, n_tokens);
      const auto x = random_floats(static_cast<size_t>(n_tokens * n_cols), 3, -4, 4);
      auto gate = random_floats(static_cast<size_t>(n_tokens), 4, -12, 12);
      gate[0] = 0.0f;  // sigmoid(0) = 0.5 exactly
      Buffer cx = make_f32(f.cpu, x), gx = make_f32(f.gpu, x);
      Buffer cg = make_f32(f.cpu, gate), gg = make_f32(f.gpu, gate);
      f.cpu.sigmoid_scale_rows(cx, cg, n_tokens, n_cols);
      f.gpu.sigmoid_scale_rows(gx, gg, n_tokens, n_cols);
      const auto want = fetch(f.cpu, cx, n_tokens * n_cols);
      const auto got = fetch(f.gpu, gx, n_tokens * n_cols);
      for (size_t i = 0; i < want.size(); ++i)
        CHECK(std::fabs(got[i] - want[i]) <= 1e-6f * std::fabs(want[i]) + 1e-30f);
    }
  }
}

TEST_CASE("cuda moe_gather and moe_scatter report a bad slot at the next sync", "[gpu]") {
  Fixture f;
  Buffer x = make_f32(f.gpu, random_floats(8, 1));  // 2 rows of 4
  Buffer out = f.gpu.alloc(8);
  Buffer bad_gather = make_i32(f.gpu, {1, 4});  // k = 2: slot 4 is token 2, outside x
  f.gpu.moe_gather(x, 4, bad_gather, 0, 2, 2, out);
  CHECK_THROWS_WITH(f.gpu.sync(), Catch::Contains("moe_gather or moe_scatter"));
  f.gpu.sync();  // the flag was cleared
  Buffer negative = make_i32(f.gpu, {-1});
  f.gpu.moe_gather(x, 4, negative, 0, 1, 2, out);
  CHECK_THROWS_WITH(f.gpu.sync(), Catch::Contains("slot outside"));

  Buffer y_slots = f.gpu.alloc(8);                 // 2 slot rows of 4
  Buffer bad_scatter = make_i32(f.gpu, {0, 2});  // slot 2 is outside
  f.gpu.moe_scatter(x, 4, bad_scatter, 0, 2, y_slots);
  CHECK_THROWS_WITH(f.gpu.sync(), Catch::Contains("slot outside"));
}
