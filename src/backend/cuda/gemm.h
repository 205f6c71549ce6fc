#pragma once
// The cuBLAS prefill matmul of the CUDA backend (used when it is built with
// batch_invariant = false):
//   out (n_tokens, d) = x (n_tokens, n) @ W^T,   W (d, n) in any supported dtype
// x is rounded to f16 into scratch; W is used in place when it is F16, else dequantized to f16
// a tile of rows at a time into scratch (at most kTileElems elements, so the 128k-row output
// matrix never needs a full f16 copy); cublasGemmEx multiplies with f16 inputs and f32
// accumulation and output (CUBLAS_COMPUTE_32F, tensor cores).
//
// Exactness: f16 inputs carry 11 significant bits, and cuBLAS picks its reduction split by
// problem size, so results depend on n_tokens (no batch invariance) and differ from the f32
// matvec by about 2^-11 * sum_i |w_i x_i| (x's rounding; the weights of block formats are
// exact in f16: a 4- or 8-bit code times an f16 scale).

#include <cublas_api.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/backend.h"
#include "backend/cuda/buffer.h"

namespace llmctl::cuda {

struct CublasApi;

class Gemm {
 public:
  // Loads cuBLAS (cublas_loader.h) and creates a handle bound to `stream`; throws
  // llmctl::Error when cuBLAS is not available.
  explicit Gemm(cudaStream_t stream);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // Whether a matmul of n_tokens rows with `type` weights is faster through cuBLAS than the
  // matvec: the matvec reads the weight once per 8 tokens, the GEMM path reads it once but
  // (except for F16) also writes and reads an f16 copy of it.
  static bool worth_it(GgmlType type, int64_t n_tokens);
  // F32 weights on the device; w.data a device address (bind_weight()).
  void matmul(const WeightView& w, const float* x, int64_t n_tokens, float* out);

  static constexpr int64_t kTileElems = int64_t{1} << 24;  // 32 MiB of f16 per weight tile

 private:
  // `buf` holds at least `bytes`; an existing buffer is replaced after the stream drains (the
  // queued kernels may still read it).
  void reserve(DeviceBuffer& buf, size_t bytes);

  cudaStream_t stream_;
  const CublasApi* api_;
  cublasHandle_t handle_ = nullptr;
  DeviceBuffer x16_, w16_;
};

}  // namespace llmctl::cuda
