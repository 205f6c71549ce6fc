#pragma once
// Device allocations checked against free device memory before they are made.

#include <cstddef>
#include <string>

namespace llmctl::cuda {

// cudaMalloc of `bytes` on the current device, after comparing the request with cudaMemGetInfo's
// free memory: a request that does not fit throws llmctl::Error naming `what`, the request, the
// free memory and the shortfall (instead of a bare cudaErrorMemoryAllocation). bytes >= 1.
void* checked_device_alloc(size_t bytes, const std::string& what);

// "1.50 GiB" style size for messages.
std::string format_bytes(size_t bytes);

}  // namespace llmctl::cuda
