// dequantize_f16: weight rows of any row format to f16, the input the cuBLAS prefill GEMM
// reads (src/backend/cuda/gemm.cpp dequantizes a tile of rows at a time into scratch).
//   out (n_rows, n) f16 bits = round_to_nearest_even(dequantize(w rows))
// Grid-stride over the element groups of the whole tile (common.cuh "Row formats"); groups
// never straddle rows because n is a multiple of the group size.

#include "kernels/common.cuh"
#include "kernels/kernels.h"

namespace llmctl::cuda {

namespace {

constexpr int kThreads = 256;

template <class Fmt>
static __global__ void dequantize_f16_kernel(const uint8_t* __restrict__ w, int64_t n_rows,
                                             int64_t n, uint16_t* __restrict__ out) {
  const int64_t groups_per_row = n / Fmt::kGroup;
  const int64_t total = n_rows * groups_per_row;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += stride) {
    const int64_t r = i / groups_per_row, g = i % groups_per_row;
    float v[Fmt::kGroup];
    Fmt::dequantize_group(w + r * Fmt::row_bytes(n), g, v);
    uint16_t* dst = out + r * n + g * Fmt::kGroup;
#pragma unroll
    for (int k = 0; k < Fmt::kGroup; ++k) dst[k] = __half_as_ushort(__float2half_rn(v[k]));
  }
}

template <class Fmt>
void launch(const void* w, int64_t n_rows, int64_t n, uint16_t* out, cudaStream_t stream) {
  if (n_rows <= 0 || n <= 0) return;
  dequantize_f16_kernel<Fmt>
      <<<grid_for(n_rows * (n / Fmt::kGroup), kThreads), kThreads, 0, stream>>>(
          static_cast<const uint8_t*>(w), n_rows, n, out);
}

}  // namespace

void launch_dequantize_f16_f32(const void* w, int64_t n_rows, int64_t n, uint16_t* out,
                               cudaStream_t stream) {
  launch<FormatF32>(w, n_rows, n, out, stream);
}
void launch_dequantize_f16_bf16(const void* w, int64_t n_rows, int64_t n, uint16_t* out,
                                cudaStream_t stream) {
  launch<FormatBF16>(w, n_rows, n, out, stream);
}
void launch_dequantize_f16_q8_0(const void* w, int64_t n_rows, int64_t n, uint16_t* out,
                                cudaStream_t stream) {
  launch<FormatQ8_0>(w, n_rows, n, out, stream);
}
void launch_dequantize_f16_q4_0(const void* w, int64_t n_rows, int64_t n, uint16_t* out,
                                cudaStream_t stream) {
  launch<FormatQ4_0>(w, n_rows, n, out, stream);
}
void launch_dequantize_f16_q4_1(const void* w, int64_t n_rows, int64_t n, uint16_t* out,
                                cudaStream_t stream) {
  launch<FormatQ4_1>(w, n_rows, n, out, stream);
}
void launch_dequantize_f16_mxfp4(const void* w, int64_t n_rows, int64_t n, uint16_t* out,
                                 cudaStream_t stream) {
  launch<FormatMxfp4>(w, n_rows, n, out, stream);
}

}  // namespace llmctl::cuda
