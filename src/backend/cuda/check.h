#pragma once
// Check macros for CUDA runtime and cuBLAS calls (host side). A failed call throws
// llmctl::Error naming the statement, the error and the place:
//   CUDA call 'cudaMalloc(&p, n)' failed: cudaErrorMemoryAllocation (out of memory)
//   at src/backend/cuda/buffer.cpp:20
// Use them on every CUDA call in src/backend/cuda/ except where a failure is an answer rather
// than an error (device probing, destructors).

#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "core/error.h"

namespace llmctl::cuda {

[[noreturn]] inline void throw_cuda_error(cudaError_t err, const char* stmt, const char* file,
                                          int line) {
  throw Error(fmt::format("CUDA call '{}' failed: {} ({}) at {}:{}", stmt, cudaGetErrorName(err),
                          cudaGetErrorString(err), file, line));
}

// The cuBLAS status name without calling into libcublas, so this header adds no link dependency.
inline const char* cublas_status_name(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR:
      return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "unknown cuBLAS status";
}

[[noreturn]] inline void throw_cublas_error(cublasStatus_t status, const char* stmt,
                                            const char* file, int line) {
  throw Error(fmt::format("cuBLAS call '{}' failed: {} ({}) at {}:{}", stmt,
                          cublas_status_name(status), static_cast<int>(status), file, line));
}

}  // namespace llmctl::cuda

#define LLMCTL_CUDA_CHECK(stmt)                                                      \
  do {                                                                               \
    const cudaError_t llmctl_cuda_err_ = (stmt);                                     \
    if (llmctl_cuda_err_ != cudaSuccess)                                             \
      ::llmctl::cuda::throw_cuda_error(llmctl_cuda_err_, #stmt, __FILE__, __LINE__); \
  } while (0)

#define LLMCTL_CUBLAS_CHECK(stmt)                                                           \
  do {                                                                                      \
    const cublasStatus_t llmctl_cublas_status_ = (stmt);                                    \
    if (llmctl_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                     \
      ::llmctl::cuda::throw_cublas_error(llmctl_cublas_status_, #stmt, __FILE__, __LINE__); \
  } while (0)

// After every kernel launch: catches bad launch configurations at once (asynchronous faults
// inside the kernel surface at the next synchronizing call's check).
#define LLMCTL_CUDA_CHECK_LAUNCH()                                                             \
  do {                                                                                         \
    const cudaError_t llmctl_cuda_err_ = cudaGetLastError();                                   \
    if (llmctl_cuda_err_ != cudaSuccess)                                                       \
      ::llmctl::cuda::throw_cuda_error(llmctl_cuda_err_, "kernel launch", __FILE__, __LINE__); \
  } while (0)
