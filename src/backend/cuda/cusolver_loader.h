#pragma once
// cuSOLVER loaded at run time (dlopen), not linked, for the same reasons as cuBLAS
// (cublas_loader.h): llmctl must start without the CUDA libraries, and only svd-embed's GPU
// path (gram_eigen_cuda.h) asks for the dense symmetric eigensolver.

#include <cusolverDn.h>
#include <fmt/format.h>

#include "core/error.h"

namespace llmctl::cuda {

// The cuSOLVER entry points llmctl calls, typed from the toolkit's own declarations.
struct CusolverApi {
  decltype(&cusolverDnCreate) create = nullptr;
  decltype(&cusolverDnDestroy) destroy = nullptr;
  decltype(&cusolverDnSetStream) set_stream = nullptr;
  decltype(&cusolverDnDsyevd_bufferSize) dsyevd_buffer_size = nullptr;
  decltype(&cusolverDnDsyevd) dsyevd = nullptr;
};

// Loads libcusolver.so.<major> (the major version llmctl was compiled against, then plain
// libcusolver.so) once per process. Throws llmctl::Error naming the library, the loader's
// message and what to install when the library or one of the symbols is missing; a later call
// tries again.
const CusolverApi& cusolver_api();

// The cuSOLVER status name without calling into libcusolver.
const char* cusolver_status_name(cusolverStatus_t status);

[[noreturn]] inline void throw_cusolver_error(cusolverStatus_t status, const char* stmt,
                                              const char* file, int line) {
  throw Error(fmt::format("cuSOLVER call '{}' failed: {} ({}) at {}:{}", stmt,
                          cusolver_status_name(status), static_cast<int>(status), file, line));
}

}  // namespace llmctl::cuda

#define LLMCTL_CUSOLVER_CHECK(stmt)                                                             \
  do {                                                                                          \
    const cusolverStatus_t llmctl_cusolver_status_ = (stmt);                                    \
    if (llmctl_cusolver_status_ != CUSOLVER_STATUS_SUCCESS)                                     \
      ::llmctl::cuda::throw_cusolver_error(llmctl_cusolver_status_, #stmt, __FILE__, __LINE__); \
  } while (0)
