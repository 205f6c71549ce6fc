// Arithmetic peak probe (compute_probe.h).
#include "backend/cpu/compute_probe.h"

#include <time.h>

#include <algorithm>
#include <vector>

#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/thread_pool.h"
#include "core/error.h"

namespace llmctl::cpu {

namespace {

// One loop: `iters` iterations of independent chains; returns a value that depends on every
// chain, so the compiler must run them. Every chain needs its previous value (the FMA's and
// dot product's accumulator), so nothing can be hoisted out of the loop. The f32 chains
// acc = acc * 0.999 + 0.001 approach 1: no overflow, no denormals to slow them down. Each
// chain starts from its own value: identical chains could be computed once.
using Loop = double (*)(int64_t iters);

// Enough chains to cover latency x throughput (FMA, dpbusd: 4 to 5 cycles x up to 2 per cycle)
// with room, and few enough to stay in registers (16 ymm, 32 zmm; checked with objdump -d: the
// inner loops hold only the FMAs / dot products and the loop counter). The int8 counts are
// those of the LLMCTL_CHAINS macros below.
constexpr int kChainsFmaAvx2 = 12, kChainsFmaAvx512 = 16, kChainsScalar = 8;
constexpr int kChainsMaddubs = 8, kChainsDpbusd = 16;

#if defined(LLMCTL_HAVE_X86)
LLMCTL_AVX512_BEGIN
LLMCTL_AVX512 double fma_avx512(int64_t iters) {
  const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(0.001f);
  __m512 acc[kChainsFmaAvx512];
  for (int k = 0; k < kChainsFmaAvx512; ++k) acc[k] = _mm512_set1_ps(0.01f * static_cast<float>(k));
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 16
    for (auto& v : acc) v = _mm512_fmadd_ps(v, a, b);
  }
  for (int k = 1; k < kChainsFmaAvx512; ++k) acc[0] = _mm512_add_ps(acc[0], acc[k]);
  return static_cast<double>(_mm512_reduce_add_ps(acc[0]));
}
LLMCTL_AVX512_END

LLMCTL_AVX2 double fma_avx2(int64_t iters) {
  const __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(0.001f);
  __m256 acc[kChainsFmaAvx2];
  for (int k = 0; k < kChainsFmaAvx2; ++k) acc[k] = _mm256_set1_ps(0.01f * static_cast<float>(k));
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 16
    for (auto& v : acc) v = _mm256_fmadd_ps(v, a, b);
  }
  for (int k = 1; k < kChainsFmaAvx2; ++k) acc[0] = _mm256_add_ps(acc[0], acc[k]);
  float out[8];
  _mm256_storeu_ps(out, acc[0]);
  return static_cast<double>(out[0] + out[7]);
}

// The int8 loops are asm on named accumulators: GCC 12 wraps every _mm512_dpbusd_epi32 in two
// register copies, and keeps an array of accumulators in memory around asm statements, either of
// which would put more than the dot products and the loop counter in the loop. u8 1 x s8 1:
// every int32 lane grows by 4 per step (wraps after 2^29 iterations: harmless).
#define LLMCTL_CHAINS8(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
#define LLMCTL_CHAINS16(X) LLMCTL_CHAINS8(X) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)

LLMCTL_AVX512_BEGIN
LLMCTL_AVX512 double dpbusd_avx512(int64_t iters) {
  const __m512i a = _mm512_set1_epi8(1), b = _mm512_set1_epi8(1);
#define LLMCTL_INIT(k) __m512i c##k = _mm512_set1_epi32(k);
  LLMCTL_CHAINS16(LLMCTL_INIT)
#undef LLMCTL_INIT
  for (int64_t i = 0; i < iters; ++i) {
    // c += dot(a (u8), b (s8)) per 4 bytes
#define LLMCTL_STEP(k) asm("vpdpbusd %2, %1, %0" : "+v"(c##k) : "v"(a), "v"(b));
    LLMCTL_CHAINS16(LLMCTL_STEP)
#undef LLMCTL_STEP
  }
  __m512i s = _mm512_setzero_si512();
#define LLMCTL_SUM(k) s = _mm512_add_epi32(s, c##k);
  LLMCTL_CHAINS16(LLMCTL_SUM)
#undef LLMCTL_SUM
  return _mm512_cvtsi512_si32(s);
}
LLMCTL_AVX512_END

// The AVX2 quantized kernels' dot product: maddubs (u8 x s8 pairs to i16), madd with ones (to
// i32), add. Only the add waits on the accumulator (1 cycle), so 8 chains keep the multiply
// units busy.
LLMCTL_AVX2 double maddubs_avx2(int64_t iters) {
  const __m256i a = _mm256_set1_epi8(1), b = _mm256_set1_epi8(1), ones = _mm256_set1_epi16(1);
#define LLMCTL_INIT(k) __m256i c##k = _mm256_set1_epi32(k);
  LLMCTL_CHAINS8(LLMCTL_INIT)
#undef LLMCTL_INIT
  __m256i t;
  for (int64_t i = 0; i < iters; ++i) {
#define LLMCTL_STEP(k)                                                    \
  asm("vpmaddubsw %3, %2, %1\n\tvpmaddwd %4, %1, %1\n\tvpaddd %1, %0, %0" \
      : "+x"(c##k), "=&x"(t)                                              \
      : "x"(a), "x"(b), "x"(ones));
    LLMCTL_CHAINS8(LLMCTL_STEP)
#undef LLMCTL_STEP
  }
  __m256i s = _mm256_setzero_si256();
#define LLMCTL_SUM(k) s = _mm256_add_epi32(s, c##k);
  LLMCTL_CHAINS8(LLMCTL_SUM)
#undef LLMCTL_SUM
  return _mm256_cvtsi256_si32(s);
}
#endif

double fma_scalar(int64_t iters) {
  float acc[kChainsScalar];
  for (int k = 0; k < kChainsScalar; ++k) acc[k] = 0.01f * static_cast<float>(k);
  for (int64_t i = 0; i < iters; ++i)
    for (float& v : acc) v = v * 0.999f + 0.001f;
  double s = 0;
  for (float v : acc) s += static_cast<double>(v);
  return s;
}

double int8_scalar(int64_t iters) {
  int32_t a = 1, b = 3;
  int32_t acc[kChainsScalar];
  for (int k = 0; k < kChainsScalar; ++k) acc[k] = k;
  for (int64_t i = 0; i < iters; ++i)
    for (int32_t& v : acc) {
      asm volatile("" : "+r"(a), "+r"(b));  // as in maddubs_avx2: no hoisting a * b
      v += a * b;
    }
  double s = 0;
  for (int32_t v : acc) s += v;
  return s;
}

// This thread's CPU time: it stops while another process has the core, the wall clock does not.
double thread_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// The best rate (1e9 ops/s) of `loop` run on every thread of the pool at once: the sum of each
// thread's ops over its own CPU time, so that the machine's peak comes out on a shared machine
// too (threads that take turns on one core each count the time they ran; two on one core's
// SMT siblings each run at half speed all the time, and so count half).
double best_rate(ThreadPool& pool, Loop loop, double ops_per_iter, int reps) {
  const auto n = static_cast<size_t>(pool.size());
  std::vector<double> sink(n), seconds(n);
  // One run of `iters` on every thread: the sum of their rates, and their shortest CPU time.
  const auto run = [&](int64_t iters, double* shortest) {
    pool.parallel_for(pool.size(), [&](int64_t, int64_t, int t) {
      const double t0 = thread_seconds();
      sink[static_cast<size_t>(t)] += loop(iters);
      seconds[static_cast<size_t>(t)] = thread_seconds() - t0;
    });
    *shortest = *std::min_element(seconds.begin(), seconds.end());
    double rate = 0;
    for (double s : seconds) rate += ops_per_iter * static_cast<double>(iters) / s / 1e9;
    return rate;  // inf when a loop took no measurable time (folded away)
  };
  // Warm-up and calibration (wide units powered up, clocks settled): grow to a millisecond,
  // then scale to about 20 ms a repetition. The cap ends the growth where a loop did no work
  // (a compiler that folded it): its rate is then absurd rather than the probe endless.
  int64_t iters = 1024;
  double s = 0;
  for (run(iters, &s); s < 1e-3 && iters < (int64_t{1} << 40); run(iters, &s)) iters *= 4;
  if (s > 0) iters = std::max(iters, static_cast<int64_t>(static_cast<double>(iters) * 0.02 / s));
  double best = 0;
  for (int r = 0; r < std::max(reps, 1); ++r) best = std::max(best, run(iters, &s));
  volatile double keep = sink[0];  // the loops' results are used
  (void)keep;
  return best;
}

}  // namespace

ComputeResult measure_compute_peak(int n_threads, int reps, MatmulIsa isa) {
  if (isa == MatmulIsa::Auto) isa = matmul_fast_auto_isa();
  if (isa == MatmulIsa::Avx2 && !matmul_fast_has_avx2())
    throw Error("compute probe: avx2 needs a CPU with AVX2, FMA and F16C");
  if (isa == MatmulIsa::Avx512 && !matmul_fast_has_avx512())
    throw Error(
        "compute probe: avx512 needs a CPU with AVX2, FMA, F16C and AVX-512 F, BW, VL, "
        "DQ and VNNI");
  // lanes x chains x 2 ops per iteration
  Loop f32 = fma_scalar, i8 = int8_scalar;
  double f32_ops = 2.0 * kChainsScalar, i8_ops = 2.0 * kChainsScalar;
#if defined(LLMCTL_HAVE_X86)
  if (isa == MatmulIsa::Avx512) {
    f32 = fma_avx512, f32_ops = 2.0 * 16 * kChainsFmaAvx512;
    i8 = dpbusd_avx512, i8_ops = 2.0 * 64 * kChainsDpbusd;
  } else if (isa == MatmulIsa::Avx2) {
    f32 = fma_avx2, f32_ops = 2.0 * 8 * kChainsFmaAvx2;
    i8 = maddubs_avx2, i8_ops = 2.0 * 32 * kChainsMaddubs;
  }
#endif
  ThreadPool pool(n_threads);
  ComputeResult r;
  r.gflop_s_f32_fma = best_rate(pool, f32, f32_ops, reps);
  r.gop_s_int8 = best_rate(pool, i8, i8_ops, reps);
  r.n_threads = n_threads;
  r.isa = matmul_isa_name(isa);
  return r;
}

}  // namespace llmctl::cpu
