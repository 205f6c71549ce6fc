// Token choice, finish reasons and statistics of generation (generate.h); the loop itself
// is the Scheduler (scheduler.cpp).
#include "model/generate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace llmctl {

int32_t pick_greedy(const float* logits, int32_t n_vocab) {
  LLMCTL_ASSERT(n_vocab > 0);
  // Strict > keeps the lowest id on ties. NaN never compares greater, so a NaN row gives 0
  // rather than a random id; diagnosing NaN logits is the caller's job (logits hash, diag/).
  int32_t best = 0;
  for (int32_t i = 1; i < n_vocab; ++i)
    if (logits[i] > logits[best]) best = i;
  return best;
}

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::Eos:
      return "eos";
    case FinishReason::Length:
      return "length";
    case FinishReason::NPredict:
      return "n_predict";
    case FinishReason::Stop:
      return "stop";
    case FinishReason::Interrupted:
      return "interrupted";
    case FinishReason::Loop:
      return "loop";
  }
  return "unknown";
}

uint64_t fnv1a_64(const float* data, size_t n) {
  uint64_t h = 14695981039346656037ULL;
  const auto* bytes = reinterpret_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n * sizeof(float); ++i) {
    h ^= bytes[i];
    h *= 1099511628211ULL;
  }
  return h;
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  // Nearest rank: the smallest value with at least p% of the values at or below it.
  const double rank =
      std::ceil(std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(values.size()));
  const size_t idx = rank < 1.0 ? 0 : static_cast<size_t>(rank) - 1;
  return values[std::min(idx, values.size() - 1)];
}

}  // namespace llmctl
