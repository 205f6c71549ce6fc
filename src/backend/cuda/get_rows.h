#pragma once
// get_rows on the GPU: the embedding lookup. Host-side wrapper of kernels/dequantize_rows.cu
// that checks shapes, dtypes, pointers and ids, then launches.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/ggml_type.h"

namespace llmctl::cuda {

// A weight table in device memory: n_rows rows of row_len elements of `type`, rows contiguous
// in ggml layout (for block types row_len / 32 blocks per row).
struct DeviceTable {
  GgmlType type = GgmlType::F32;
  const void* data = nullptr;
  int64_t n_rows = 0;
  int64_t row_len = 0;
};

// F32, F16, BF16, Q8_0, Q4_0, Q4_1 and MXFP4.
bool get_rows_supports(GgmlType type);

// Bytes of one row of `row_len` elements of `type`; throws llmctl::Error (expected vs actual)
// when the type is unsupported or row_len does not fit its block size.
size_t get_rows_row_bytes(GgmlType type, int64_t row_len);

// out (n_ids, row_len) fp32 in device memory, 16-byte aligned:
//   out[i, :] = dequantize(table[ids[i], :])  for 0 <= i < n_ids
// `ids` is HOST memory and is checked here: every id must lie in [0, table.n_rows), otherwise
// llmctl::Error is thrown before anything runs on the device, so a bad token id can never make
// the kernel read outside the table. The call is asynchronous on `stream`; `ids` may be reused
// as soon as it returns (they are copied to a stream-ordered device buffer).
void get_rows(const DeviceTable& table, const int32_t* ids, int64_t n_ids, float* out,
              cudaStream_t stream = nullptr);

// The launch alone, for ids already in device memory and checked by the caller (the CUDA
// backend checks them on the host first): dispatches on table.type, then checks the launch.
// Unchecked ids give NaN rows (kernels/kernels.h). Throws for an unsupported type.
void launch_get_rows_device_ids(const DeviceTable& table, const int32_t* dev_ids, int64_t n_ids,
                                float* out, cudaStream_t stream);

}  // namespace llmctl::cuda
