#pragma once
// Rows of logits ([position][n_vocab]) compared with a reference's (golden tests).

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

namespace llmctl::test {

// The largest |a - b| over every row; the shapes must agree.
inline double max_abs_diff(const std::vector<std::vector<float>>& a,
                           const std::vector<std::vector<double>>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0.0;
  for (size_t p = 0; p < a.size(); ++p) {
    REQUIRE(a[p].size() == b[p].size());
    for (size_t i = 0; i < a[p].size(); ++i)
      worst = std::max(worst, std::abs(static_cast<double>(a[p][i]) - b[p][i]));
  }
  return worst;
}

inline std::vector<std::vector<double>> as_double(const std::vector<std::vector<float>>& a) {
  std::vector<std::vector<double>> out;
  for (const auto& row : a) out.emplace_back(row.begin(), row.end());
  return out;
}

}  // namespace llmctl::test
