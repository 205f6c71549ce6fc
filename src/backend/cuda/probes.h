#pragma once
// The device's measured yardsticks `llmctl bench --device cuda` divides by (issue 4's targets
// are percentages of them): copy bandwidth for decode, cuBLAS's matrix rate for prefill.

#include <cstddef>
#include <cstdint>

namespace llmctl::cuda {

struct CopyBandwidth {
  double gb_per_s = 0;  // best of the runs: 2 * bytes / seconds (each byte read and written)
  size_t bytes = 0;     // buffer size copied
  int runs = 0;
};

// cudaMemcpyAsync device-to-device of a `bytes` buffer on `device`, timed with CUDA events:
// one warm-up copy, then `runs` timed copies; the best rate counts (as a STREAM-style peak).
// Throws llmctl::Error when the device or the two buffers are not available.
CopyBandwidth measure_copy_bandwidth(int device, size_t bytes, int runs);

// cuBLAS's f16-input, f32-accumulate/output matrix rate on `device` in GFLOP/s
// (2 * size^3 / time, the best of `runs` cublasGemmEx calls after a warm-up): the call the
// prefill path makes (gemm.h), on a square problem big enough to saturate the device. Loads
// cuBLAS (cublas_loader.h); throws llmctl::Error when it or the memory is not available.
double measure_gemm_rate(int device, int64_t size, int runs);

}  // namespace llmctl::cuda
