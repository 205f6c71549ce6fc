// The mixture-of-experts ops on CUDA (backend.h "mixture of experts"): arguments arrive checked
// (backend.cpp); each op calls one launcher from kernels/kernels.h and checks the launch. The
// slots of moe_gather and moe_scatter are device-resident, so a bad one is reported through
// the device error flag at the next sync (the CPU reference throws at once).
#include "backend/cuda/check.h"
#include "backend/cuda/cuda_backend.h"
#include "kernels/kernels.h"

namespace llmctl::cuda {

void CudaBackend::moe_route_impl(const Buffer& logits, int64_t n_tokens, int64_t n_expert,
                                 int64_t k, bool normalize, Buffer& ids, Buffer& weights) {
  launch_moe_route_f32(logits.data(), n_tokens, n_expert, k, normalize, ids.i32(), weights.data(),
                       stream_);
  LLMCTL_CUDA_CHECK_LAUNCH();
}

void CudaBackend::moe_gather_impl(const Buffer& x, int64_t n_cols, const Buffer& slots,
                                  int64_t offset, int64_t m, int64_t k, Buffer& out) {
  launch_moe_gather_f32(x.data(), x.size() / n_cols, n_cols, slots.i32() + offset, m, k,
                        out.data(), error_flag_, stream_);
  LLMCTL_CUDA_CHECK_LAUNCH();
}

void CudaBackend::moe_scatter_impl(const Buffer& y, int64_t n_cols, const Buffer& slots,
                                   int64_t offset, int64_t m, Buffer& y_slots) {
  launch_moe_scatter_f32(y.data(), n_cols, slots.i32() + offset, m, y_slots.size() / n_cols,
                         y_slots.data(), error_flag_, stream_);
  LLMCTL_CUDA_CHECK_LAUNCH();
}

void CudaBackend::moe_combine_impl(const Buffer& y_slots, const Buffer& weights, int64_t n_tokens,
                                   int64_t k, int64_t n_cols, Buffer& out) {
  launch_moe_combine_f32(y_slots.data(), weights.data(), n_tokens, k, n_cols, out.data(), stream_);
  LLMCTL_CUDA_CHECK_LAUNCH();
}

void CudaBackend::sigmoid_scale_rows_impl(Buffer& x, const Buffer& gate, int64_t n_tokens,
                                          int64_t n_cols) {
  launch_sigmoid_scale_rows_f32(x.data(), gate.data(), n_tokens, n_cols, stream_);
  LLMCTL_CUDA_CHECK_LAUNCH();
}

}  // namespace llmctl::cuda
