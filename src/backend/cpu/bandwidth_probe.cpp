// Memory read bandwidth probe (bandwidth_probe.h).
#include "backend/cpu/bandwidth_probe.h"

#include <immintrin.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "backend/cpu/thread_pool.h"
#include "core/cpu_features.h"
#include "core/error.h"

namespace llmctl::cpu {

namespace {

// Eight independent accumulators: the adds never wait on each other, so the loads, not the
// arithmetic, set the pace.
__attribute__((target("avx2"))) float sum_avx2(const float* p, size_t n) {
  __m256 a[8];
  for (auto& v : a) v = _mm256_setzero_ps();
  for (size_t i = 0; i + 64 <= n; i += 64)
    for (size_t k = 0; k < 8; ++k) a[k] = _mm256_add_ps(a[k], _mm256_load_ps(p + i + 8 * k));
  __m256 s = _mm256_setzero_ps();
  for (auto& v : a) s = _mm256_add_ps(s, v);
  float out[8];
  _mm256_storeu_ps(out, s);
  return out[0] + out[1] + out[2] + out[3] + out[4] + out[5] + out[6] + out[7];
}

float sum_scalar(const float* p, size_t n) {
  float a[8] = {};
  for (size_t i = 0; i + 8 <= n; i += 8)
    for (size_t k = 0; k < 8; ++k) a[k] += p[i + k];
  return a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7];
}

}  // namespace

BandwidthResult measure_read_bandwidth(uint64_t bytes, int n_threads, int reps) {
  bytes = std::max<uint64_t>(bytes / 256 * 256, 256);
  void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) throw Error("bandwidth probe: cannot allocate its buffer");
  std::memset(mem, 1, bytes);
  const auto* data = static_cast<const float*>(mem);
  const size_t n = bytes / sizeof(float);
  const bool avx2 = cpu_features().avx2;
  ThreadPool pool(n_threads);
  // 64-float chunks so every thread's range starts 256-byte aligned.
  const auto n_chunks = static_cast<int64_t>(n / 64);
  std::vector<float> sink(static_cast<size_t>(n_threads));
  double best = 0;
  for (int r = 0; r < std::max(reps, 1); ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(n_chunks, [&](int64_t b, int64_t e, int t) {
      const float* p = data + b * 64;
      const auto len = static_cast<size_t>((e - b) * 64);
      sink[static_cast<size_t>(t)] += avx2 ? sum_avx2(p, len) : sum_scalar(p, len);
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, static_cast<double>(bytes) / s / 1e9);
  }
  munmap(mem, bytes);
  // The sums are never used; reading `sink` keeps the compiler from dropping the loads.
  volatile float keep = sink[0];
  (void)keep;
  return BandwidthResult{best, bytes, n_threads, avx2 ? "avx2" : "scalar"};
}

}  // namespace llmctl::cpu
