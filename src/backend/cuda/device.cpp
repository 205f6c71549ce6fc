#include "backend/cuda/device.h"

#include <cuda_runtime.h>
#include <fmt/format.h>

namespace llmctl::cuda {

namespace {

std::string explain(cudaError_t err) {
  switch (err) {
    case cudaErrorInsufficientDriver:
      return "CUDA driver not found or older than the runtime (is the NVIDIA driver installed?)";
    case cudaErrorNoDevice:
      return "no CUDA-capable device is visible (check CUDA_VISIBLE_DEVICES)";
    default:
      return fmt::format("CUDA runtime error {}: {}", static_cast<int>(err), cudaGetErrorString(err));
  }
}

}  // namespace

GpuProbe probe_devices() {
  GpuProbe probe;
  probe.cuda_compiled = true;
  cudaRuntimeGetVersion(&probe.runtime_version);
  if (cudaDriverGetVersion(&probe.driver_version) != cudaSuccess || probe.driver_version == 0) {
    probe.reason = "CUDA driver not found";
    return probe;
  }
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    probe.reason = explain(err);
    cudaGetLastError();  // clear the sticky error state for later callers
    return probe;
  }
  if (count == 0) {
    probe.reason = explain(cudaErrorNoDevice);
    return probe;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    GpuInfo g;
    g.index = i;
    g.name = prop.name;
    g.total_bytes = prop.totalGlobalMem;
    g.cc_major = prop.major;
    g.cc_minor = prop.minor;
    size_t free_b = 0, total_b = 0;
    if (cudaSetDevice(i) == cudaSuccess && cudaMemGetInfo(&free_b, &total_b) == cudaSuccess)
      g.free_bytes = free_b;
    probe.gpus.push_back(g);
  }
  if (probe.gpus.empty()) probe.reason = "devices were counted but none could be queried";
  return probe;
}

}  // namespace llmctl::cuda
