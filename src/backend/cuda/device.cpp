#include "backend/cuda/device.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "backend/cuda/check.h"
#include "core/error.h"

namespace llmctl::cuda {

namespace {

std::string explain(cudaError_t err) {
  switch (err) {
    case cudaErrorInsufficientDriver:
      return "CUDA driver not found or older than the runtime (is the NVIDIA driver installed?)";
    case cudaErrorNoDevice:
      return "no CUDA-capable device is visible (check CUDA_VISIBLE_DEVICES)";
    default:
      return fmt::format("CUDA runtime error {}: {}", cudaGetErrorName(err),
                         cudaGetErrorString(err));
  }
}

// Properties and free memory of device `index`; throws llmctl::Error (via the check macros).
// cudaMemGetInfo needs a context on that device, so the caller restores its current device.
GpuInfo query_device(int index) {
  cudaDeviceProp prop{};
  LLMCTL_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  GpuInfo g;
  g.index = index;
  g.name = prop.name;
  g.total_bytes = prop.totalGlobalMem;
  g.cc_major = prop.major;
  g.cc_minor = prop.minor;
  size_t free_b = 0, total_b = 0;
  LLMCTL_CUDA_CHECK(cudaSetDevice(index));
  LLMCTL_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  g.free_bytes = free_b;
  return g;
}

}  // namespace

GpuProbe probe_devices() {
  GpuProbe probe;
  probe.cuda_compiled = true;
  cudaRuntimeGetVersion(&probe.runtime_version);
  // Without a driver this still succeeds and reports 0: libcuda.so could not be loaded.
  if (cudaDriverGetVersion(&probe.driver_version) != cudaSuccess || probe.driver_version == 0) {
    probe.reason = "CUDA driver not found";
    return probe;
  }
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    probe.reason = explain(err != cudaSuccess ? err : cudaErrorNoDevice);
    cudaGetLastError();  // clear the error state for later callers
    return probe;
  }
  int current = 0;
  const bool have_current = cudaGetDevice(&current) == cudaSuccess;
  std::string failures;
  for (int i = 0; i < count; ++i) {
    try {
      probe.gpus.push_back(query_device(i));
    } catch (const Error& e) {
      // Probing reports, never throws: keep the other devices and say what went wrong.
      failures += fmt::format("{}device {}: {}", failures.empty() ? "" : "; ", i, e.what());
      cudaGetLastError();
    }
  }
  if (have_current) cudaSetDevice(current);
  if (probe.gpus.empty())
    probe.reason =
        fmt::format("{} device(s) counted but none could be queried: {}", count, failures);
  return probe;
}

int visible_device_count() {
  if (int driver = 0; cudaDriverGetVersion(&driver) != cudaSuccess || driver == 0) return 0;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

}  // namespace llmctl::cuda
