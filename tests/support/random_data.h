#pragma once
// Random test inputs shared by the CPU backend tests.

#include <cstddef>
#include <random>
#include <vector>

namespace llmctl::test {

// n draws of N(0, scale^2) from rng.
inline std::vector<float> random_floats(std::mt19937& rng, size_t n, float scale = 1.0f) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

}  // namespace llmctl::test
