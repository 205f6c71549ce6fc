#pragma once
// Device allocations checked against free device memory before they are made.

#include <cstddef>
#include <string>

namespace llmctl::cuda {

// cudaMalloc of `bytes` on the current device, after comparing the request with cudaMemGetInfo's
// free memory: a request that does not fit throws llmctl::Error naming `what`, the request, the
// free memory and the shortfall (instead of a bare cudaErrorMemoryAllocation). bytes >= 1.
void* checked_device_alloc(size_t bytes, const std::string& what);

}  // namespace llmctl::cuda
