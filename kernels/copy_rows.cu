// copy_rows: out (n_rows, row_len) row i = x row rows[i]; one thread block per output row.
// A row index outside x (the CPU reference throws) writes a NaN row and raises the device error
// flag, which the backend reports at its next sync.

#include "kernels/common.cuh"
#include "kernels/kernels.h"

namespace llmctl::cuda {

namespace {

constexpr int kThreads = 256;

static __global__ void copy_rows_kernel(const float* __restrict__ x, int64_t x_rows,
                                        int64_t row_len, const int32_t* __restrict__ rows,
                                        float* __restrict__ out, int* error_flag) {
  const int32_t r = rows[blockIdx.x];
  float* o = out + static_cast<int64_t>(blockIdx.x) * row_len;
  const bool valid = r >= 0 && r < x_rows;
  if (!valid && threadIdx.x == 0) atomicCAS(error_flag, 0, kDeviceErrorCopyRow);
  const float* src = x + (valid ? static_cast<int64_t>(r) : 0) * row_len;
  for (int64_t i = threadIdx.x; i < row_len; i += blockDim.x)
    o[i] = valid ? src[i] : __int_as_float(0x7fc00000);
}

}  // namespace

void launch_copy_rows_f32(const float* x, int64_t x_rows, int64_t row_len, const int32_t* rows,
                          int64_t n_rows, float* out, int* error_flag, cudaStream_t stream) {
  if (n_rows <= 0 || row_len <= 0) return;
  copy_rows_kernel<<<static_cast<unsigned>(n_rows), kThreads, 0, stream>>>(x, x_rows, row_len, rows,
                                                                           out, error_flag);
}

}  // namespace llmctl::cuda
