#pragma once
// Greedy decoding of the same prompt on two forward passes (the CPU reference and the GPU) in
// lockstep, each following its own argmax: the ids each picked and the largest logit
// difference over every step (test_gpu_model's parity checks).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "model/forward.h"

namespace llmctl::test {

struct GreedyParity {
  std::vector<int32_t> ids_a, ids_b;
  double worst = 0.0;  // max |logit_a - logit_b| over the steps
};

inline int32_t argmax_id(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

inline GreedyParity greedy_parity(Forward& a, Forward& b, const std::vector<int32_t>& prompt,
                                  int steps) {
  GreedyParity p;
  std::vector<float> la, lb;
  for (const int32_t t : prompt) {
    la = a.step(t);
    lb = b.step(t);
  }
  for (int i = 0; i < steps && la.size() == lb.size(); ++i) {
    for (size_t k = 0; k < la.size(); ++k)
      p.worst = std::max(p.worst, std::fabs(static_cast<double>(la[k]) - static_cast<double>(lb[k])));
    p.ids_a.push_back(argmax_id(la));
    p.ids_b.push_back(argmax_id(lb));
    la = a.step(p.ids_a.back());
    lb = b.step(p.ids_b.back());
  }
  if (la.size() != lb.size()) p.worst = INFINITY;  // the passes disagree on the vocabulary
  return p;
}

}  // namespace llmctl::test
