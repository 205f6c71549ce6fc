#include "backend/cuda/memory.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "backend/cuda/check.h"
#include "core/byte_size.h"
#include "core/error.h"

namespace llmctl::cuda {

void* checked_device_alloc(size_t bytes, const std::string& what) {
  size_t free_b = 0, total_b = 0;
  LLMCTL_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  if (bytes > free_b)
    throw Error(fmt::format("GPU memory: {} needs {} but only {} of {} are free ({} short)", what,
                            format_bytes(bytes), format_bytes(free_b), format_bytes(total_b),
                            format_bytes(bytes - free_b)),
                "lower -c/--ctx-size or the batch size, use a smaller quantization, or use "
                "--device cpu");
  void* p = nullptr;
  // Free memory can still run short (fragmentation, another process): the check macro then
  // reports cudaErrorMemoryAllocation with this statement.
  LLMCTL_CUDA_CHECK(cudaMalloc(&p, bytes));
  return p;
}

}  // namespace llmctl::cuda
