#pragma once
// The machine's arithmetic peak in the instructions the matmul kernels use: f32 FMAs (float
// weights) and int8 dot products (quantized weights against int8 activations). Many
// independent chains with their operands in registers, no memory traffic, so the multiply
// units, not latency or loads, set the pace. `llmctl bench` reports prefill GFLOP/s as a
// fraction of it (issue 19: "prefill within 70 % of the machine's measured FMA or VNNI peak").
//
// The instruction set is the one the matmul kernels run (matmul_fast_auto_isa(), so
// LLMCTL_MATMUL_ISA moves it too):
//   avx512  f32: vfmadd zmm (16 lanes);  int8: vpdpbusd zmm (64 u8 x s8 products)
//   avx2    f32: vfmadd ymm (8 lanes);   int8: vpmaddubsw + vpmaddwd + vpaddd ymm (32 products),
//           the pair the AVX2 quantized kernels use (AVX-VNNI is not: the kernels do not use it)
//   scalar  f32: a * b + c;              int8: int32 multiply-add (baseline x86-64 code: the
//           compiler puts the f32 chains in SSE lanes; a rough figure for the scalar kernels)
// An FMA lane counts 2 flops, a u8 x s8 multiply-add 2 ops. No AMX instructions.

#include "backend/cpu/matmul_fast.h"

namespace llmctl::cpu {

struct ComputeResult {
  double gflop_s_f32_fma = 0;  // best of the repetitions, all threads together
  double gop_s_int8 = 0;       // the same for int8 dot products (GOP = 1e9 ops)
  int n_threads = 0;
  const char* isa = "";  // "avx512", "avx2" or "scalar"
};

// Runs each loop on n_threads threads at once (one loop per thread, ThreadPool), calibrated to
// about 20 ms of CPU time a repetition, `reps` repetitions after a warm-up, and returns the best
// rates. A repetition's rate is the sum of every thread's ops over its own CPU time, so another
// process taking turns on the cores does not lower it (the machine's peak, not this moment's
// share of it); threads on one core's SMT siblings do share its units, and count so.
// isa Auto: matmul_fast_auto_isa(). Throws Error for an instruction set the CPU lacks (what
// matmul_fast_has_avx2() / _avx512() require) and for n_threads < 1.
ComputeResult measure_compute_peak(int n_threads, int reps, MatmulIsa isa = MatmulIsa::Auto);

}  // namespace llmctl::cpu
