#pragma once
// Launchers for the kernels in kernels/*.cu: the only entry points host code may call.
// Plain C++ types and cudaStream_t only, so any host .cpp can include this header.
//
// Launchers trust their arguments (shapes, alignment, device pointers): the checks live once
// in the host-side wrappers in src/backend/cuda/, which also check the launch with
// LLMCTL_CUDA_CHECK_LAUNCH(). Launchers are asynchronous on `stream` and never synchronize.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace llmctl::cuda {

// ---------------------------------------------------------------------------
// get_rows (kernels/dequantize_rows.cu): embedding lookup with dequantization
// ---------------------------------------------------------------------------
// table (n_rows, row_len) in the named format, rows contiguous in ggml layout; ids (n_ids,)
// int32 on the device; out (n_ids, row_len) fp32: out[i, :] = dequantize(table[ids[i], :]).
// An id outside [0, n_rows) writes a NaN row and reads nothing (the wrapper rejects such ids
// before launch; this is the last line of defence). n_ids == 0 launches nothing.
// Requires 1 <= n_ids <= 2^31 - 1. Block formats also require row_len % 32 == 0 and `out`
// 16-byte aligned (they store float4).

void launch_get_rows_f32_f32(const float* table, int64_t n_rows, int64_t row_len,
                             const int32_t* ids, int64_t n_ids, float* out, cudaStream_t stream);
void launch_get_rows_f16_f32(const uint16_t* table, int64_t n_rows, int64_t row_len,
                             const int32_t* ids, int64_t n_ids, float* out, cudaStream_t stream);
void launch_get_rows_bf16_f32(const uint16_t* table, int64_t n_rows, int64_t row_len,
                              const int32_t* ids, int64_t n_ids, float* out, cudaStream_t stream);
void launch_get_rows_q8_0_f32(const void* table, int64_t n_rows, int64_t row_len,
                              const int32_t* ids, int64_t n_ids, float* out, cudaStream_t stream);
void launch_get_rows_q4_0_f32(const void* table, int64_t n_rows, int64_t row_len,
                              const int32_t* ids, int64_t n_ids, float* out, cudaStream_t stream);
void launch_get_rows_q4_1_f32(const void* table, int64_t n_rows, int64_t row_len,
                              const int32_t* ids, int64_t n_ids, float* out, cudaStream_t stream);

}  // namespace llmctl::cuda
