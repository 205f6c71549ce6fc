#include "backend/cuda/probes.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>

#include "backend/cuda/buffer.h"
#include "backend/cuda/check.h"
#include "backend/cuda/cublas_loader.h"
#include "backend/cuda/memory.h"
#include "core/byte_size.h"
#include "core/error.h"

namespace llmctl::cuda {

namespace {

// Events and a stream, destroyed on every path (the checks throw).
struct Timing {
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  Timing() {
    LLMCTL_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    LLMCTL_CUDA_CHECK(cudaEventCreate(&start));
    LLMCTL_CUDA_CHECK(cudaEventCreate(&stop));
  }
  ~Timing() {
    if (stop != nullptr) cudaEventDestroy(stop);
    if (start != nullptr) cudaEventDestroy(start);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
  Timing(const Timing&) = delete;
  Timing& operator=(const Timing&) = delete;

  // Milliseconds `work` takes on the stream.
  template <class Work>
  float time(Work&& work) {
    LLMCTL_CUDA_CHECK(cudaEventRecord(start, stream));
    work();
    LLMCTL_CUDA_CHECK(cudaEventRecord(stop, stream));
    LLMCTL_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    LLMCTL_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    return ms;
  }
};

// A cuBLAS handle destroyed on every path.
struct Handle {
  const CublasApi& api = cublas_api();
  cublasHandle_t h = nullptr;
  Handle() { LLMCTL_CUBLAS_CHECK(api.create(&h)); }
  ~Handle() {
    if (h != nullptr) api.destroy(h);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
};

// The probe's buffers checked against free memory first, for a message that names the probe.
void require_free(size_t bytes, const char* what) {
  size_t free_b = 0, total_b = 0;
  LLMCTL_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  if (bytes > free_b)
    throw Error(fmt::format("{}: needs {} of GPU memory, {} free", what, format_bytes(bytes),
                            format_bytes(free_b)));
}

double rate(double units, float ms) { return ms > 0 ? units / (static_cast<double>(ms) * 1e6) : 0; }

}  // namespace

CopyBandwidth measure_copy_bandwidth(int device, size_t bytes, int runs) {
  LLMCTL_CUDA_CHECK(cudaSetDevice(device));
  if (bytes == 0) throw Error("copy-bandwidth probe: expected a buffer of at least 1 byte");
  require_free(2 * bytes, "copy-bandwidth probe");
  CopyBandwidth result;
  result.bytes = bytes;
  result.runs = std::max(runs, 1);
  DeviceBuffer src(bytes), dst(bytes);
  Timing t;
  const auto copy = [&] {
    LLMCTL_CUDA_CHECK(
        cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice, t.stream));
  };
  LLMCTL_CUDA_CHECK(cudaMemsetAsync(src.data(), 1, bytes, t.stream));
  copy();  // warm-up
  for (int r = 0; r < result.runs; ++r)
    result.gb_per_s =
        std::max(result.gb_per_s, rate(2.0 * static_cast<double>(bytes), t.time(copy)));
  return result;
}

double measure_gemm_rate(int device, int64_t size, int runs) {
  LLMCTL_CUDA_CHECK(cudaSetDevice(device));
  const auto n = static_cast<size_t>(size);
  require_free(n * n * (2 + 2 + 4), "GEMM-rate probe");
  // Zero-filled f16 inputs: a dense GEMM's rate does not depend on the values.
  DeviceBuffer a(n * n * 2), b(n * n * 2), c(n * n * 4);
  Timing t;
  Handle handle;
  LLMCTL_CUDA_CHECK(cudaMemsetAsync(a.data(), 0, a.size(), t.stream));
  LLMCTL_CUDA_CHECK(cudaMemsetAsync(b.data(), 0, b.size(), t.stream));
  LLMCTL_CUBLAS_CHECK(handle.api.set_stream(handle.h, t.stream));
  const int dim = static_cast<int>(size);
  const float alpha = 1.0f, beta = 0.0f;
  const auto gemm = [&] {
    LLMCTL_CUBLAS_CHECK(handle.api.gemm_ex(handle.h, CUBLAS_OP_T, CUBLAS_OP_N, dim, dim, dim,
                                           &alpha, a.data(), CUDA_R_16F, dim, b.data(), CUDA_R_16F,
                                           dim, &beta, c.data(), CUDA_R_32F, dim,
                                           CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  };
  gemm();  // warm-up: heuristics and kernel loading
  const double flops =
      2.0 * static_cast<double>(size) * static_cast<double>(size) * static_cast<double>(size);
  double best = 0;
  for (int r = 0; r < std::max(runs, 1); ++r) best = std::max(best, rate(flops, t.time(gemm)));
  return best;
}

}  // namespace llmctl::cuda
