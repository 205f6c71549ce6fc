#pragma once
// The machine's memory read bandwidth, measured the way a decode step reads weights: several
// threads streaming through a buffer far larger than the caches with wide vector loads and
// independent accumulators. `llmctl bench` reports decode speed as a fraction of it.

#include <cstdint>

namespace llmctl::cpu {

struct BandwidthResult {
  double gb_per_s = 0;  // best of the repetitions (GB = 1e9 bytes)
  uint64_t bytes = 0;   // buffer size
  int n_threads = 0;
  const char* isa = "";  // "avx2" or "scalar"
};

// Reads a buffer of `bytes` (rounded to 64) `reps` times with n_threads threads and returns
// the best rate. The buffer is written once first so every page is resident.
BandwidthResult measure_read_bandwidth(uint64_t bytes, int n_threads, int reps);

}  // namespace llmctl::cpu
