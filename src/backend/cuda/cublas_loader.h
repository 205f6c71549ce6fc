#pragma once
// cuBLAS loaded at run time (dlopen), not linked: llmctl must start, and the batch-invariant
// CUDA backend must work, on machines with a driver but without the cuBLAS libraries, and the
// static cuBLAS archives would add several hundred MB of device code to the binary. Only the
// cuBLAS prefill path (gemm.h) asks for it.

#include <cublas_api.h>

namespace llmctl::cuda {

// cublasGemmEx with the cublasComputeType_t argument (the header adds a C++ overload taking
// cudaDataType, so decltype(&cublasGemmEx) is ambiguous).
using CublasGemmExFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int,
                                          int, int, const void*, const void*, cudaDataType, int,
                                          const void*, cudaDataType, int, const void*, void*,
                                          cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);

// The cuBLAS entry points the backend calls, typed from the toolkit's own declarations.
struct CublasApi {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  CublasGemmExFn gemm_ex = nullptr;
};

// Loads libcublas.so.<major> (the major version llmctl was compiled against, then plain
// libcublas.so) once per process. Throws llmctl::Error with the loader's message and a hint
// when the library or one of the symbols is missing; later calls try again.
const CublasApi& cublas_api();

}  // namespace llmctl::cuda
