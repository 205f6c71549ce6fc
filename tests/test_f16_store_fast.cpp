// The fast backend's F16 KV store (f16_store_fast.h) against core/fp16.h's f32_to_fp16 and the
// reference backend's kv_store: the same bits for every input, NaNs, ties and overflow included.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "backend/cpu/attention_fast.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_fast_backend.h"
#include "backend/cpu/f16_store_fast.h"
#include "core/fp16.h"
#include "support/backend_buffers.h"

using namespace llmctl;
using llmctl::test::make;
using llmctl::test::make_ids;

namespace {

// For every f16 value: itself widened, the midpoint to the next f16 up (a tie: round to even),
// one f32 ulp either side of that midpoint, and a value a quarter of the way; then the edges
// f32_to_fp16 treats apart: overflow (65520 rounds to inf, just below it to 65504), values
// under half the smallest subnormal, -0, infinities and NaNs with payloads.
std::vector<float> hard_values() {
  std::vector<float> v;
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const auto bits = static_cast<uint16_t>(h);
    if ((bits & 0x7c00u) == 0x7c00u) continue;  // inf / NaN: below
    const float lo = fp16_to_f32(bits);
    v.push_back(lo);
    if ((bits & 0x7fffu) == 0x7bffu) continue;  // the largest finite: its "next" is inf
    const float hi = fp16_to_f32(static_cast<uint16_t>(bits + 1));
    const float mid = lo + (hi - lo) / 2;  // exact: f32 has 13 more mantissa bits
    v.push_back(mid);
    v.push_back(std::nextafter(mid, 0.0f));
    v.push_back(std::nextafter(mid, 2 * mid));
    v.push_back(lo + (hi - lo) / 4);
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (float x : {65504.0f, 65519.99f, 65520.0f, 65536.0f, 1e30f, 2.9e-8f, 3.0e-8f, 1e-40f, -0.0f,
                  inf, -inf})
    for (float s : {1.0f, -1.0f}) v.push_back(s * x);
  for (uint32_t nan : {0x7fc00000u, 0x7f800001u, 0x7fbfffffu, 0xffc12345u, 0x7fe00000u})
    v.push_back(bits_to_f32(nan));
  return v;
}

std::vector<uint16_t> reference_halves(const std::vector<float>& x) {
  std::vector<uint16_t> h(x.size());
  for (size_t i = 0; i < x.size(); ++i) h[i] = f32_to_fp16(x[i]);
  return h;
}

}  // namespace

TEST_CASE("f32_to_f16_fast: f32_to_fp16's bits for every f16, its ties, overflow and NaNs",
          "[cpu]") {
  if (!cpu::attention_fast_available()) {
    WARN("skipped: no AVX2+FMA+F16C on this CPU");
    return;
  }
  std::vector<float> x = hard_values();
  // shuffled, so NaNs and edges land at every lane of a group of 8 and in the tail
  std::mt19937 rng(5);
  std::shuffle(x.begin(), x.end(), rng);
  const std::vector<uint16_t> want = reference_halves(x);
  for (size_t n : {x.size(), x.size() - 3, size_t{7}, size_t{1}, size_t{0}}) {
    std::vector<uint16_t> got(n + 1, 0xabcd);
    cpu::f32_to_f16_fast(x.data(), static_cast<int64_t>(n), got.data());
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) bad += got[i] != want[i] ? 1u : 0u;
    CAPTURE(n);
    CHECK(bad == 0);
    CHECK(got[n] == 0xabcd);  // nothing written past n
  }
}

TEST_CASE("fast backend kv_store: F16 pools byte-identical to the reference, any thread count",
          "[cpu]") {
  if (!cpu::attention_fast_available()) {
    WARN("skipped: no AVX2+FMA+F16C on this CPU");
    return;
  }
  const std::vector<float> hard = hard_values();
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  // 300 tokens split over the threads; rows of up to 96 values
  const int64_t n = 300, n_slots = 512;
  std::vector<float> k(static_cast<size_t>(n * 96)), v(k.size());
  for (size_t i = 0; i < k.size(); ++i) {
    k[i] = i % 5 == 0 ? hard[(i * 7919) % hard.size()] : normal(rng);
    v[i] = i % 3 == 0 ? hard[(i * 104729) % hard.size()] : normal(rng);
  }
  std::vector<int32_t> slots(static_cast<size_t>(n_slots));
  for (size_t i = 0; i < slots.size(); ++i) slots[i] = static_cast<int32_t>(i);
  std::shuffle(slots.begin(), slots.end(), rng);
  slots.resize(static_cast<size_t>(n));

  // kv_dim 76: 9 groups of 8 and a tail of 4; a Q8_0 pool (the reference's store) needs 32s
  struct Case {
    BufferType k_type, v_type;
    int64_t kv_dim;
  };
  for (const Case c : {Case{BufferType::F16, BufferType::F16, 76},
                       Case{BufferType::F16, BufferType::Q8_0, 96}}) {
    const int64_t kv_dim = c.kv_dim;
    auto store = [&](Backend& be, int64_t n_tokens) {
      Buffer kp = be.alloc(n_slots * kv_dim, c.k_type), vp = be.alloc(n_slots * kv_dim, c.v_type);
      std::memset(kp.raw(), 0x5a, buffer_bytes(c.k_type, n_slots * kv_dim));
      std::memset(vp.raw(), 0x5a, buffer_bytes(c.v_type, n_slots * kv_dim));
      Buffer kb = make(be, std::vector<float>(k.begin(), k.begin() + n_tokens * kv_dim));
      Buffer vb = make(be, std::vector<float>(v.begin(), v.begin() + n_tokens * kv_dim));
      be.kv_store(kb, vb, make_ids(be, std::vector<int32_t>(slots.begin(), slots.begin() + n_tokens)),
                  n_tokens, kv_dim, kp, vp);
      const auto* kr = static_cast<const uint8_t*>(kp.raw());
      const auto* vr = static_cast<const uint8_t*>(vp.raw());
      std::vector<uint8_t> bytes(kr, kr + buffer_bytes(c.k_type, n_slots * kv_dim));
      bytes.insert(bytes.end(), vr, vr + buffer_bytes(c.v_type, n_slots * kv_dim));
      return bytes;
    };
    for (int64_t n_tokens : {n, int64_t{1}}) {
      cpu::CpuBackend ref;
      const std::vector<uint8_t> want = store(ref, n_tokens);
      for (int threads : {1, 2, 3}) {
        cpu::CpuFastBackend fast(threads);
        CAPTURE(static_cast<int>(c.v_type), n_tokens, threads);
        CHECK(store(fast, n_tokens) == want);
      }
    }
  }
}
