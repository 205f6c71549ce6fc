// moe_scatter: y_slots row slots[i] = y row i, i < m: one expert's output rows back to their
// (token, rank) slots (backend.h "mixture of experts"); one thread block per row. A slot
// outside [0, n_slots) (the CPU reference throws) stores nothing and raises
// kDeviceErrorMoeSlot, which the backend reports at its next sync.

#include "kernels/common.cuh"
#include "kernels/kernels.h"

namespace llmctl::cuda {

namespace {

constexpr int kThreads = 256;

static __global__ void moe_scatter_kernel(const float* __restrict__ y, int64_t n_cols,
                                          const int32_t* __restrict__ slots, int64_t n_slots,
                                          float* __restrict__ y_slots, int* error_flag) {
  const int32_t s = slots[blockIdx.x];
  if (s < 0 || s >= n_slots) {
    if (threadIdx.x == 0) atomicCAS(error_flag, 0, kDeviceErrorMoeSlot);
    return;
  }
  const float* src = y + static_cast<int64_t>(blockIdx.x) * n_cols;
  float* o = y_slots + static_cast<int64_t>(s) * n_cols;
  for (int64_t c = threadIdx.x; c < n_cols; c += blockDim.x) o[c] = src[c];
}

}  // namespace

void launch_moe_scatter_f32(const float* y, int64_t n_cols, const int32_t* slots, int64_t m,
                            int64_t n_slots, float* y_slots, int* error_flag,
                            cudaStream_t stream) {
  if (m <= 0 || n_cols <= 0) return;
  moe_scatter_kernel<<<static_cast<unsigned>(m), kThreads, 0, stream>>>(y, n_cols, slots, n_slots,
                                                                         y_slots, error_flag);
}

}  // namespace llmctl::cuda
