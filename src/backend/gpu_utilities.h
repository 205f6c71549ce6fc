#pragma once
// The GPU work outside the Backend seam: bench's yardsticks (copy bandwidth, cuBLAS GEMM rate).
// GPU `index` is a visible device (probe_gpus() in selection.h); without CUDA compiled in each
// throws Error saying so. (svd-embed's Gram eigen solve is a Backend op: backend.h gram_eigen.)

#include <cstddef>
#include <cstdint>

namespace llmctl {

// Device-to-device copy bandwidth of GPU `index` in GB/s (2 * bytes / time, the best of `runs`
// copies of a `bytes` buffer): the yardstick for GPU decode. Throws Error when there is no such
// GPU or CUDA is not compiled in.
double measure_gpu_copy_bandwidth(int index, size_t bytes, int runs);
// cuBLAS's f16-input/f32-accumulate GEMM rate of GPU `index` in GFLOP/s on a size^3 problem
// (best of `runs`): the yardstick for GPU prefill. Throws Error as above, or when cuBLAS cannot
// be loaded.
double measure_gpu_gemm_rate(int index, int64_t size, int runs);

}  // namespace llmctl
