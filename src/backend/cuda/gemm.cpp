#include "backend/cuda/gemm.h"

#include <fmt/format.h>

#include <algorithm>

#include "backend/cuda/check.h"
#include "backend/cuda/cublas_loader.h"
#include "core/error.h"
#include "kernels/kernels.h"

namespace llmctl::cuda {

namespace {

using DequantizeF16 = void (*)(const void*, int64_t, int64_t, uint16_t*, cudaStream_t);

DequantizeF16 dequantize_f16_launcher(GgmlType type) {
  switch (type) {
    case GgmlType::F32:
      return launch_dequantize_f16_f32;
    case GgmlType::BF16:
      return launch_dequantize_f16_bf16;
    case GgmlType::Q8_0:
      return launch_dequantize_f16_q8_0;
    case GgmlType::Q4_0:
      return launch_dequantize_f16_q4_0;
    case GgmlType::Q4_1:
      return launch_dequantize_f16_q4_1;
    case GgmlType::MXFP4:
      return launch_dequantize_f16_mxfp4;
    default:
      throw Error(
          fmt::format("cuda gemm: no f16 dequantization for {} weights", ggml_type_name(type)));
  }
}

int to_int(int64_t v, const char* what) {
  if (v > int64_t{INT32_MAX})
    throw Error(fmt::format("cuda gemm: {} {} exceeds cuBLAS's int range", what, v));
  return static_cast<int>(v);
}

}  // namespace

Gemm::Gemm(cudaStream_t stream) : stream_(stream), api_(&cublas_api()) {
  LLMCTL_CUBLAS_CHECK(api_->create(&handle_));
  const cublasStatus_t st = api_->set_stream(handle_, stream_);
  if (st != CUBLAS_STATUS_SUCCESS) {
    api_->destroy(handle_);
    LLMCTL_CUBLAS_CHECK(st);
  }
}

// Destructors must not throw: a failing destroy means the context is already broken.
Gemm::~Gemm() {
  if (handle_ != nullptr) api_->destroy(handle_);
}

bool Gemm::worth_it(GgmlType type, int64_t n_tokens) {
  // Break-even estimates from bytes moved per weight element: the matvec reads
  // n_tokens / 8 copies; the GEMM path reads 1 (F16), or reads the packed weight and writes and
  // reads 2-byte copies. To be tuned on a GPU (gpu-check.sh prints pp rates for both modes).
  return n_tokens >= (type == GgmlType::F16 ? 16 : 64);
}

void Gemm::reserve(DeviceBuffer& buf, size_t bytes) {
  if (buf.size() >= bytes) return;
  LLMCTL_CUDA_CHECK(cudaStreamSynchronize(stream_));
  buf = DeviceBuffer();
  buf = DeviceBuffer(bytes);
}

// Row-major out (T, d) = x (T, n) @ W^T is column-major out^T (d, T) = W' (d, n) x' (n, T)
// where the row-major W (d, n) read column-major is W^T (n, d), hence op(A) = T, lda = n.
void Gemm::matmul(const WeightView& w, const float* x, int64_t n_tokens, float* out) {
  const int64_t d = w.n_rows, n = w.n_cols;
  const int m_tokens = to_int(n_tokens, "n_tokens");
  const int k = to_int(n, "n_cols");
  reserve(x16_, static_cast<size_t>(n_tokens * n) * sizeof(uint16_t));
  launch_convert_f32_f16(x, n_tokens * n, x16_.as<uint16_t>(), stream_);
  LLMCTL_CUDA_CHECK_LAUNCH();
  const float alpha = 1.0f, beta = 0.0f;
  const auto gemm = [&](const void* a, int64_t r0, int64_t rows) {
    LLMCTL_CUBLAS_CHECK(api_->gemm_ex(handle_, CUBLAS_OP_T, CUBLAS_OP_N, to_int(rows, "rows"),
                                      m_tokens, k, &alpha, a, CUDA_R_16F, k, x16_.data(),
                                      CUDA_R_16F, k, &beta, out + r0, CUDA_R_32F, to_int(d, "d"),
                                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  };
  if (w.type == GgmlType::F16) {
    gemm(w.data, 0, d);
    return;
  }
  const DequantizeF16 dequantize = dequantize_f16_launcher(w.type);
  const int64_t tile_rows = std::min(d, std::max<int64_t>(1, kTileElems / n));
  reserve(w16_, static_cast<size_t>(tile_rows * n) * sizeof(uint16_t));
  const size_t row_bytes = weight_row_bytes(w.type, n);
  for (int64_t r0 = 0; r0 < d; r0 += tile_rows) {
    const int64_t rows = std::min(tile_rows, d - r0);
    // The tile is rewritten only after the previous GEMM read it: both are on stream_.
    dequantize(static_cast<const uint8_t*>(w.data) + static_cast<size_t>(r0) * row_bytes, rows, n,
               w16_.as<uint16_t>(), stream_);
    LLMCTL_CUDA_CHECK_LAUNCH();
    gemm(w16_.data(), r0, rows);
  }
}

}  // namespace llmctl::cuda
