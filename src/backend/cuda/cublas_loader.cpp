#include "backend/cuda/cublas_loader.h"

#include <fmt/format.h>

#include <string>

#include "backend/cuda/dynamic_library.h"

namespace llmctl::cuda {

namespace {

CublasApi load() {
  const std::string what = fmt::format("cuBLAS {}", CUBLAS_VER_MAJOR);
  const DynamicLibrary lib = open_library(
      {fmt::format("libcublas.so.{}", CUBLAS_VER_MAJOR), "libcublas.so"}, what,
      "install the CUDA toolkit's cuBLAS (libcublas) or add its directory to "
      "LD_LIBRARY_PATH, or keep the batch-invariant CUDA matmul (no cuBLAS needed)");
  const std::string expected = fmt::format("cuBLAS {}.x", CUBLAS_VER_MAJOR);
  CublasApi api;
  lib.resolve("cublasCreate_v2", what, expected, api.create);
  lib.resolve("cublasDestroy_v2", what, expected, api.destroy);
  lib.resolve("cublasSetStream_v2", what, expected, api.set_stream);
  lib.resolve("cublasGemmEx", what, expected, api.gemm_ex);
  return api;
}

}  // namespace

const CublasApi& cublas_api() { return load_once(load); }

}  // namespace llmctl::cuda
