#pragma once
// svd-embed on the GPU: the Gram matrix G = A^T A from float64 products (cuBLAS DGEMM through
// cublasGemmEx with CUBLAS_COMPUTE_64F) and its eigen-decomposition in float64 (cuSOLVER
// Dsyevd). Both libraries are loaded at run time (cublas_loader.h, cusolver_loader.h).
//
//   A (m, n) row-major float32, m >= n. Read column-major, a block of rows r0..r0+len of A is
//   B = A[r0:r0+len]^T (n, len) with leading dimension n, so G += B B^T is
//   gemm(N, T, n, n, len, B, ld n, B, ld n) -> G (n, n) column-major (both triangles written;
//   Dsyevd reads the lower one).
//
// Float64 products cost milliseconds here (a 32000 x 2048 matrix: ~0.27 TFLOP), so the GPU
// always forms the float64 Gram: the float32-product Gram and its error check (the CPU's
// speed-up, diag/gram_eigen.h) are not needed, and the accuracy is that of the CPU's f64 path.

#include <cstdint>

#include "backend/gpu_gram_eigen.h"

namespace llmctl::cuda {

// Eigenvalues of G (ascending) and, with want_vectors, its eigenvectors, on CUDA device
// `device`. Every buffer is sized first (plan_gpu_gram_memory against cudaMemGetInfo) and a
// plan that does not fit throws Error before anything is allocated. Throws Error when
// cuBLAS/cuSOLVER cannot be loaded, a CUDA/cuBLAS/cuSOLVER call fails, or Dsyevd reports
// info != 0. max_block_bytes: see plan_gpu_gram_memory (tests make it small to get many
// blocks).
GpuGramEigen gram_eigen_f64(int device, const float* a, int64_t m, int64_t n, bool want_vectors,
                            size_t max_block_bytes = kGpuGramMaxBlockBytes);

}  // namespace llmctl::cuda
