// moe_gather: out (m, n_cols) row i = x row (slots[offset + i] / k), the input rows of one
// expert's (token, rank) slots (backend.h "mixture of experts"); one thread block per output
// row. A slot that is negative or names a token outside x (the CPU reference throws) writes a
// NaN row and raises kDeviceErrorMoeSlot, which the backend reports at its next sync.

#include "kernels/common.cuh"
#include "kernels/kernels.h"

namespace llmctl::cuda {

namespace {

constexpr int kThreads = 256;

static __global__ void moe_gather_kernel(const float* __restrict__ x, int64_t x_rows,
                                         int64_t n_cols, const int32_t* __restrict__ slots,
                                         int64_t k, float* __restrict__ out, int* error_flag) {
  const int32_t s = slots[blockIdx.x];
  const int64_t token = s >= 0 ? s / k : -1;
  const bool valid = token >= 0 && token < x_rows;
  if (!valid && threadIdx.x == 0) atomicCAS(error_flag, 0, kDeviceErrorMoeSlot);
  const float* src = x + (valid ? token : 0) * n_cols;
  float* o = out + static_cast<int64_t>(blockIdx.x) * n_cols;
  for (int64_t c = threadIdx.x; c < n_cols; c += blockDim.x)
    o[c] = valid ? src[c] : __int_as_float(0x7fc00000);
}

}  // namespace

void launch_moe_gather_f32(const float* x, int64_t x_rows, int64_t n_cols, const int32_t* slots,
                           int64_t m, int64_t k, float* out, int* error_flag,
                           cudaStream_t stream) {
  if (m <= 0 || n_cols <= 0) return;
  moe_gather_kernel<<<static_cast<unsigned>(m), kThreads, 0, stream>>>(x, x_rows, n_cols, slots, k,
                                                                        out, error_flag);
}

}  // namespace llmctl::cuda
