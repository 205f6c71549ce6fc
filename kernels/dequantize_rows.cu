// get_rows: gather rows of a (possibly quantized) weight table into fp32 rows. This is the
// token-embedding lookup: out[i, :] = dequantize(table[ids[i], :]).
//
// Mapping: blockIdx.x picks the output row i; the threads of gridDim.y blocks stride over the
// row's element groups (common.cuh "Row formats"). Consecutive threads write consecutive
// groups, so stores coalesce; loads of a quantized row are contiguous bytes too. The kernel is
// bandwidth bound: per output element it reads 0.56 (Q4_0) to 4 (F32) bytes and writes 4.

#include "kernels/common.cuh"
#include "kernels/kernels.h"

namespace llmctl::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kGroupsPerThread = 4;  // enough work per thread to amortize the id load
constexpr int64_t kMaxGridY = 65535;

// A quiet NaN marks rows whose id was out of range (see kernels.h).
__device__ __forceinline__ float quiet_nan() { return __int_as_float(0x7fc00000); }

template <class Fmt>
static __global__ void get_rows_kernel(const uint8_t* __restrict__ table, int64_t n_rows,
                                       int64_t row_len, const int32_t* __restrict__ ids,
                                       float* __restrict__ out) {
  const int64_t i = blockIdx.x;
  const int64_t id = ids[i];
  const bool valid = id >= 0 && id < n_rows;
  const uint8_t* src = table + (valid ? id : 0) * Fmt::row_bytes(row_len);
  float* dst = out + i * row_len;
  const int64_t n_groups = row_len / Fmt::kGroup;
  const int64_t stride = static_cast<int64_t>(gridDim.y) * blockDim.x;
  for (int64_t g = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x; g < n_groups;
       g += stride) {
    float v[Fmt::kGroup];
    if (valid) {
      Fmt::dequantize_group(src, g, v);
    } else {
      for (int k = 0; k < Fmt::kGroup; ++k) v[k] = quiet_nan();
    }
    if constexpr (Fmt::kGroup == 4) {
      // row_len % 32 == 0 and a 16-byte aligned `out` make every group 16-byte aligned.
      reinterpret_cast<float4*>(dst)[g] = make_float4(v[0], v[1], v[2], v[3]);
    } else {
      static_assert(Fmt::kGroup == 1, "groups are 1 or 4 elements");
      dst[g] = v[0];
    }
  }
}

template <class Fmt>
void launch_get_rows(const void* table, int64_t n_rows, int64_t row_len, const int32_t* ids,
                     int64_t n_ids, float* out, cudaStream_t stream) {
  if (n_ids <= 0 || row_len <= 0) return;
  const int64_t n_groups = row_len / Fmt::kGroup;
  const int64_t per_block = int64_t{kThreads} * kGroupsPerThread;
  int64_t grid_y = (n_groups + per_block - 1) / per_block;
  if (grid_y > kMaxGridY) grid_y = kMaxGridY;
  const dim3 grid(static_cast<unsigned>(n_ids), static_cast<unsigned>(grid_y));
  get_rows_kernel<Fmt><<<grid, kThreads, 0, stream>>>(static_cast<const uint8_t*>(table), n_rows,
                                                      row_len, ids, out);
}

}  // namespace

void launch_get_rows_f32_f32(const float* table, int64_t n_rows, int64_t row_len,
                             const int32_t* ids, int64_t n_ids, float* out, cudaStream_t stream) {
  launch_get_rows<FormatF32>(table, n_rows, row_len, ids, n_ids, out, stream);
}
void launch_get_rows_f16_f32(const uint16_t* table, int64_t n_rows, int64_t row_len,
                             const int32_t* ids, int64_t n_ids, float* out, cudaStream_t stream) {
  launch_get_rows<FormatF16>(table, n_rows, row_len, ids, n_ids, out, stream);
}
void launch_get_rows_bf16_f32(const uint16_t* table, int64_t n_rows, int64_t row_len,
                              const int32_t* ids, int64_t n_ids, float* out, cudaStream_t stream) {
  launch_get_rows<FormatBF16>(table, n_rows, row_len, ids, n_ids, out, stream);
}
void launch_get_rows_q8_0_f32(const void* table, int64_t n_rows, int64_t row_len,
                              const int32_t* ids, int64_t n_ids, float* out, cudaStream_t stream) {
  launch_get_rows<FormatQ8_0>(table, n_rows, row_len, ids, n_ids, out, stream);
}
void launch_get_rows_q4_0_f32(const void* table, int64_t n_rows, int64_t row_len,
                              const int32_t* ids, int64_t n_ids, float* out, cudaStream_t stream) {
  launch_get_rows<FormatQ4_0>(table, n_rows, row_len, ids, n_ids, out, stream);
}
void launch_get_rows_q4_1_f32(const void* table, int64_t n_rows, int64_t row_len,
                              const int32_t* ids, int64_t n_ids, float* out, cudaStream_t stream) {
  launch_get_rows<FormatQ4_1>(table, n_rows, row_len, ids, n_ids, out, stream);
}
void launch_get_rows_mxfp4_f32(const void* table, int64_t n_rows, int64_t row_len,
                               const int32_t* ids, int64_t n_ids, float* out,
                               cudaStream_t stream) {
  launch_get_rows<FormatMxfp4>(table, n_rows, row_len, ids, n_ids, out, stream);
}

}  // namespace llmctl::cuda
