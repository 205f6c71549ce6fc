#pragma once
// svd-embed's GPU path, the parts without CUDA types: what it returns and how it sizes its
// device memory (pure arithmetic, tested on the CPU). The computation itself is
// backend/cuda/gram_eigen_cuda.h, reached through the Backend op gram_eigen (backend.h,
// CudaBackend).
//
//   A (m, n) row-major float32, m >= n  ->  G = A^T A (n, n) from float64 products (cuBLAS
//   DGEMM over blocks of rows widened to float64 on the host)  ->  eigenvalues (and, when asked,
//   eigenvectors) of G by cuSOLVER Dsyevd in float64.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace llmctl {

struct GpuGramEigen {
  std::vector<double> lambda;   // (n,) eigenvalues of G, ascending
  std::vector<double> vectors;  // want_vectors: (n, n) column-major, column i for lambda[i]
  std::string device_name;      // e.g. "NVIDIA H200"
  int device_index = 0;         // CUDA device index
  int64_t block_rows = 0;       // rows of A per uploaded block
  size_t device_bytes = 0;      // device memory allocated (GpuGramMemoryPlan::total)
  double seconds_gram = 0;      // widening, upload and DGEMMs until G is complete
  double seconds_eigen = 0;     // Dsyevd and the download of its results
};

// Device buffers of one Gram + eigensolve: one float64 block of rows of A (the host widens the
// next block into pinned memory while the device copies and multiplies this one; the copy of
// block i + 1 is ordered after block i's DGEMM on one stream), G, the eigenvalues, cuSOLVER's
// workspace and its info word.
struct GpuGramMemoryPlan {
  int64_t block_rows = 0;  // rows per block (<= m)
  size_t block_bytes = 0;  // one block: block_rows * n * 8
  size_t gram_bytes = 0;   // n * n * 8
  size_t eigenvalue_bytes = 0;
  size_t workspace_bytes = 0;
  size_t info_bytes = 0;
  size_t reserve_bytes = 0;  // left free for cuBLAS/cuSOLVER's own allocations
  size_t total() const {
    return block_bytes + gram_bytes + eigenvalue_bytes + workspace_bytes + info_bytes;
  }
};

// Memory left free for the libraries' internal buffers (cuBLAS workspace, cuSOLVER scratch).
constexpr size_t kGpuGramReserveBytes = size_t{256} << 20;
// One block at most this large: bounds the pinned host staging (two blocks) as well.
constexpr size_t kGpuGramMaxBlockBytes = size_t{256} << 20;
// Fewer rows per block than this would make the DGEMMs inefficient; refused below it.
constexpr int64_t kGpuGramMinBlockRows = 256;

// Sizes the buffers for A (m, n) with m >= n >= 1 and a workspace of `workspace_bytes`
// against `free_bytes` of `total_bytes` device memory: the block holds as many rows as fit
// (at most m, at most max_block_bytes, at least kGpuGramMinBlockRows). Throws Error when even
// min(m, kGpuGramMinBlockRows) rows do not fit, naming each buffer, the free memory and the
// shortfall.
GpuGramMemoryPlan plan_gpu_gram_memory(int64_t m, int64_t n, size_t workspace_bytes,
                                       size_t free_bytes, size_t total_bytes,
                                       size_t max_block_bytes = kGpuGramMaxBlockBytes);

}  // namespace llmctl
