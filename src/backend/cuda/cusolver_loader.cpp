#include "backend/cuda/cusolver_loader.h"

#include <string>

#include "backend/cuda/dynamic_library.h"

namespace llmctl::cuda {

namespace {

CusolverApi load() {
  const std::string what =
      fmt::format("cuSOLVER {} (libcusolver.so.{})", CUSOLVER_VER_MAJOR, CUSOLVER_VER_MAJOR);
  const DynamicLibrary lib = open_library(
      {fmt::format("libcusolver.so.{}", CUSOLVER_VER_MAJOR), "libcusolver.so"}, what,
      "install the CUDA toolkit's cuSOLVER (libcusolver, e.g. the libcusolver-* or "
      "cuda-libraries package) or add its directory to LD_LIBRARY_PATH; or use --device cpu");
  const std::string expected = fmt::format("cuSOLVER {}.x", CUSOLVER_VER_MAJOR);
  CusolverApi api;
  lib.resolve("cusolverDnCreate", what, expected, api.create);
  lib.resolve("cusolverDnDestroy", what, expected, api.destroy);
  lib.resolve("cusolverDnSetStream", what, expected, api.set_stream);
  lib.resolve("cusolverDnDsyevd_bufferSize", what, expected, api.dsyevd_buffer_size);
  lib.resolve("cusolverDnDsyevd", what, expected, api.dsyevd);
  return api;
}

}  // namespace

const CusolverApi& cusolver_api() { return load_once(load); }

const char* cusolver_status_name(cusolverStatus_t status) {
  switch (status) {
    case CUSOLVER_STATUS_SUCCESS:
      return "CUSOLVER_STATUS_SUCCESS";
    case CUSOLVER_STATUS_NOT_INITIALIZED:
      return "CUSOLVER_STATUS_NOT_INITIALIZED";
    case CUSOLVER_STATUS_ALLOC_FAILED:
      return "CUSOLVER_STATUS_ALLOC_FAILED";
    case CUSOLVER_STATUS_INVALID_VALUE:
      return "CUSOLVER_STATUS_INVALID_VALUE";
    case CUSOLVER_STATUS_ARCH_MISMATCH:
      return "CUSOLVER_STATUS_ARCH_MISMATCH";
    case CUSOLVER_STATUS_EXECUTION_FAILED:
      return "CUSOLVER_STATUS_EXECUTION_FAILED";
    case CUSOLVER_STATUS_INTERNAL_ERROR:
      return "CUSOLVER_STATUS_INTERNAL_ERROR";
    case CUSOLVER_STATUS_NOT_SUPPORTED:
      return "CUSOLVER_STATUS_NOT_SUPPORTED";
    case CUSOLVER_STATUS_INVALID_WORKSPACE:
      return "CUSOLVER_STATUS_INVALID_WORKSPACE";
    default:
      return "other cuSOLVER status";
  }
}

}  // namespace llmctl::cuda
