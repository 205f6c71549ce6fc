#pragma once
// A cheap identity check for a weight held in memory: FNV-1a over up to 4 KiB at each end.
// Caches of converted weights (the CUDA upload, the CPU repacked copy) are keyed by host
// address and shape; the fingerprint keeps a different weight that later lands at a reused
// address (another file mapped there) from being served the old copy. Reads at most 8 KiB.

#include <cstddef>
#include <cstdint>

namespace llmctl {

inline uint64_t weight_fingerprint(const void* data, size_t bytes) {
  constexpr size_t kEdge = 4096;
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](const uint8_t* q, size_t n) {
    for (size_t i = 0; i < n; ++i) h = (h ^ q[i]) * 1099511628211ull;
  };
  if (bytes <= 2 * kEdge) {
    mix(p, bytes);
  } else {
    mix(p, kEdge);
    mix(p + bytes - kEdge, kEdge);
  }
  return h;
}

}  // namespace llmctl
