// kernels/top_k_key.cuh on the CPU (no GPU needed): sorting (value, index) pairs by the
// kernel's 64-bit key, descending, gives the contract's order (backend.h top_k), written here
// independently as a comparator: value descending, NaN below every number, +0 == -0, equal
// values lower index first. Also: keys are distinct and never 0 (the sort's padding), and the
// index comes back out of the key.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "kernels/top_k_key.cuh"

TEST_CASE("top_k key order is the contract's order", "[cpu][cuda]") {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {std::numeric_limits<float>::quiet_NaN(),
                          -std::numeric_limits<float>::quiet_NaN(),
                          inf,
                          -inf,
                          0.0f,
                          -0.0f,
                          std::numeric_limits<float>::denorm_min(),
                          -std::numeric_limits<float>::denorm_min(),
                          std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::lowest(),
                          1.0f,
                          1.0f,
                          -1.0f};
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> level(-6, 6);
  for (int i = 0; i < 2000; ++i) v.push_back(static_cast<float>(level(rng)) * 0.5f);  // ties
  std::shuffle(v.begin(), v.end(), rng);
  const auto n = static_cast<int32_t>(v.size());

  std::vector<int32_t> by_contract(static_cast<size_t>(n)), by_key(static_cast<size_t>(n));
  std::iota(by_contract.begin(), by_contract.end(), 0);
  std::iota(by_key.begin(), by_key.end(), 0);
  std::sort(by_contract.begin(), by_contract.end(), [&v](int32_t a, int32_t b) {
    const float va = v[static_cast<size_t>(a)], vb = v[static_cast<size_t>(b)];
    if (std::isnan(va) != std::isnan(vb)) return std::isnan(vb);
    if (!std::isnan(va) && va != vb) return va > vb;
    return a < b;
  });
  std::sort(by_key.begin(), by_key.end(), [&v](int32_t a, int32_t b) {
    return llmctl::cuda::top_k_key(v[static_cast<size_t>(a)], a) >
           llmctl::cuda::top_k_key(v[static_cast<size_t>(b)], b);
  });
  CHECK(by_key == by_contract);

  std::set<llmctl::cuda::TopKKey> keys;
  for (int32_t i = 0; i < n; ++i) {
    const llmctl::cuda::TopKKey k = llmctl::cuda::top_k_key(v[static_cast<size_t>(i)], i);
    CHECK(k != 0);
    CHECK(llmctl::cuda::top_k_key_index(k) == i);
    keys.insert(k);
  }
  CHECK(keys.size() == v.size());
  // The largest index a row can have still leaves key 0 free.
  CHECK(llmctl::cuda::top_k_key(std::numeric_limits<float>::quiet_NaN(), INT32_MAX - 1) != 0);
}
