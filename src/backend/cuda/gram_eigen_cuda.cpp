// G = A^T A (float64 DGEMMs) and Dsyevd on the GPU; see gram_eigen_cuda.h. Also
// CudaBackend::gram_eigen_impl, the op of backend.h that calls it.

#include "backend/cuda/gram_eigen_cuda.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <utility>
#include <vector>

#include "backend/cuda/buffer.h"
#include "backend/cuda/check.h"
#include "backend/cuda/cublas_loader.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cusolver_loader.h"
#include "core/error.h"
#include "core/gram_error.h"

namespace llmctl::cuda {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A CUDA, cuBLAS or cuSOLVER object (handle, stream, event, pinned buffer), destroyed on every
// path (the checks throw). Created by the caller into `h`; a destroy failure is not reported.
template <class T>
struct Owned {
  T h{};
  std::function<void(T)> destroy;
  explicit Owned(std::function<void(T)> d) : destroy(std::move(d)) {}
  ~Owned() {
    if (h != T{}) destroy(h);
  }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
};

struct Event : Owned<cudaEvent_t> {
  Event() : Owned([](cudaEvent_t e) { cudaEventDestroy(e); }) {
    LLMCTL_CUDA_CHECK(cudaEventCreateWithFlags(&h, cudaEventDisableTiming));
  }
};

// Page-locked host staging, so the block uploads run asynchronously at full PCIe rate.
struct PinnedBuffer : Owned<void*> {
  explicit PinnedBuffer(size_t bytes) : Owned([](void* p) { cudaFreeHost(p); }) {
    LLMCTL_CUDA_CHECK(cudaMallocHost(&h, bytes));
  }
  double* data() const { return static_cast<double*>(h); }
};

// G (n, n) = A^T A into `gram`, one block of plan.block_rows rows at a time: the host widens
// block i + 1 into the other pinned buffer while the device copies and multiplies block i.
void form_gram(const float* a, int64_t m, int64_t n, const GpuGramMemoryPlan& plan,
               const CublasApi& blas, cublasHandle_t handle, cudaStream_t stream,
               DeviceBuffer& block, DeviceBuffer& gram) {
  const int dim = static_cast<int>(n);
  PinnedBuffer host0(plan.block_bytes), host1(plan.block_bytes);
  double* host[2] = {host0.data(), host1.data()};
  Event copied[2];
  const double one = 1.0, zero = 0.0;
  int64_t i = 0;
  for (int64_t r0 = 0; r0 < m; r0 += plan.block_rows, ++i) {
    const int64_t len = std::min(plan.block_rows, m - r0);
    const size_t j = static_cast<size_t>(i % 2);
    // The copy that last read this staging buffer must be done before it is rewritten.
    if (i >= 2) LLMCTL_CUDA_CHECK(cudaEventSynchronize(copied[j].h));
    const float* src = a + r0 * n;
    std::copy(src, src + len * n, host[j]);  // float -> double, exact
    LLMCTL_CUDA_CHECK(cudaMemcpyAsync(block.data(), host[j],
                                      static_cast<size_t>(len * n) * sizeof(double),
                                      cudaMemcpyHostToDevice, stream));
    LLMCTL_CUDA_CHECK(cudaEventRecord(copied[j].h, stream));
    // G (n, n) (+)= B B^T, B = this block read column-major (n, len), ld n.
    LLMCTL_CUBLAS_CHECK(blas.gemm_ex(
        handle, CUBLAS_OP_N, CUBLAS_OP_T, dim, dim, static_cast<int>(len), &one, block.data(),
        CUDA_R_64F, dim, block.data(), CUDA_R_64F, dim, i == 0 ? &zero : &one, gram.data(),
        CUDA_R_64F, dim, CUBLAS_COMPUTE_64F, CUBLAS_GEMM_DEFAULT));
  }
  // The staging buffers are freed on return: everything that reads them must be done.
  LLMCTL_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace

GpuGramEigen gram_eigen_f64(int device, const float* a, int64_t m, int64_t n, bool want_vectors,
                            size_t max_block_bytes) {
  if (n < 1 || m < n)
    throw Error(fmt::format("GPU Gram: expected a tall matrix (m >= n >= 1), got {} x {}", m, n));
  LLMCTL_CUDA_CHECK(cudaSetDevice(device));
  cudaDeviceProp prop{};
  LLMCTL_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  GpuGramEigen out;
  out.device_name = prop.name;
  out.device_index = device;
  // Both libraries first: a missing library is a likelier failure than the memory.
  const CublasApi& blas = cublas_api();
  const CusolverApi& sol = cusolver_api();
  Owned<cublasHandle_t> blas_handle([&blas](cublasHandle_t h) { blas.destroy(h); });
  LLMCTL_CUBLAS_CHECK(blas.create(&blas_handle.h));
  Owned<cusolverDnHandle_t> solver([&sol](cusolverDnHandle_t h) { sol.destroy(h); });
  LLMCTL_CUSOLVER_CHECK(sol.create(&solver.h));
  Owned<cudaStream_t> stream([](cudaStream_t st) { cudaStreamDestroy(st); });
  LLMCTL_CUDA_CHECK(cudaStreamCreateWithFlags(&stream.h, cudaStreamNonBlocking));
  LLMCTL_CUBLAS_CHECK(blas.set_stream(blas_handle.h, stream.h));
  LLMCTL_CUSOLVER_CHECK(sol.set_stream(solver.h, stream.h));

  size_t free_b = 0, total_b = 0;
  LLMCTL_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  // G and a block without the workspace first: a matrix far too large is refused before the
  // workspace query (whose 32-bit size could overflow for it).
  (void)plan_gpu_gram_memory(m, n, 0, free_b, total_b, max_block_bytes);
  const int dim = static_cast<int>(n);
  const cusolverEigMode_t jobz =
      want_vectors ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
  // The workspace size depends on n and jobz only: queried before G exists.
  int lwork = 0;
  LLMCTL_CUSOLVER_CHECK(sol.dsyevd_buffer_size(solver.h, jobz, CUBLAS_FILL_MODE_LOWER, dim, nullptr,
                                               dim, nullptr, &lwork));
  LLMCTL_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  const GpuGramMemoryPlan plan =
      plan_gpu_gram_memory(m, n, static_cast<size_t>(std::max(lwork, 1)) * sizeof(double), free_b,
                           total_b, max_block_bytes);
  out.block_rows = plan.block_rows;
  out.device_bytes = plan.total();

  DeviceBuffer gram(plan.gram_bytes), w(plan.eigenvalue_bytes), work(plan.workspace_bytes),
      info(plan.info_bytes);
  auto t0 = std::chrono::steady_clock::now();
  {
    DeviceBuffer block(plan.block_bytes);  // freed before the eigensolver runs
    form_gram(a, m, n, plan, blas, blas_handle.h, stream.h, block, gram);
  }
  out.seconds_gram = seconds_since(t0);

  t0 = std::chrono::steady_clock::now();
  LLMCTL_CUSOLVER_CHECK(sol.dsyevd(solver.h, jobz, CUBLAS_FILL_MODE_LOWER, dim, gram.as<double>(),
                                   dim, w.as<double>(), work.as<double>(), std::max(lwork, 1),
                                   info.as<int>()));
  int info_host = 0;
  out.lambda.resize(static_cast<size_t>(n));
  LLMCTL_CUDA_CHECK(
      cudaMemcpyAsync(&info_host, info.data(), sizeof(int), cudaMemcpyDeviceToHost, stream.h));
  LLMCTL_CUDA_CHECK(cudaMemcpyAsync(out.lambda.data(), w.data(), plan.eigenvalue_bytes,
                                    cudaMemcpyDeviceToHost, stream.h));
  if (want_vectors) {
    out.vectors.resize(static_cast<size_t>(n) * static_cast<size_t>(n));
    LLMCTL_CUDA_CHECK(cudaMemcpyAsync(out.vectors.data(), gram.data(), plan.gram_bytes,
                                      cudaMemcpyDeviceToHost, stream.h));
  }
  LLMCTL_CUDA_CHECK(cudaStreamSynchronize(stream.h));
  out.seconds_eigen = seconds_since(t0);
  if (info_host != 0)
    throw Error(fmt::format("cuSOLVER Dsyevd failed (info = {}) on a {} x {} Gram matrix",
                            info_host, n, n));
  return out;
}

GramEigen CudaBackend::gram_eigen_impl(const float* a, int64_t m, int64_t n, bool want_vectors) {
  // A wide A goes over as A^T (n, m): tall, the same nonzero Gram eigenvalues (backend.cpp
  // refuses eigenvectors for it).
  std::vector<float> transposed;
  if (m < n) {
    transposed.resize(static_cast<size_t>(m * n));
    for (int64_t r = 0; r < m; ++r)
      for (int64_t c = 0; c < n; ++c) transposed[static_cast<size_t>(c * m + r)] = a[r * n + c];
    a = transposed.data();
    std::swap(m, n);
  }
  GpuGramEigen g = cuda::gram_eigen_f64(device_, a, m, n, want_vectors);
  GramEigen out;
  out.lambda = std::move(g.lambda);
  out.vectors = std::move(g.vectors);
  out.gram_precision = "f64";
  out.seconds_gram = g.seconds_gram;
  out.seconds_eigen = g.seconds_eigen;
  double trace = 0;  // sum of the eigenvalues: G's trace up to the solver's rounding
  for (double l : out.lambda) trace += l;
  out.gram_error_norm = f64_gram_error(trace, m);
  return out;
}

}  // namespace llmctl::cuda
