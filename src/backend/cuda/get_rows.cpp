#include "backend/cuda/get_rows.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <cstdint>
#include <limits>

#include "backend/cuda/check.h"
#include "core/error.h"
#include "kernels/kernels.h"

namespace llmctl::cuda {

namespace {

constexpr const char* kSupported = "F32, F16, BF16, Q8_0, Q4_0, Q4_1, MXFP4";

// Device (or managed) memory is fine; a host pointer here would fault inside the kernel.
void require_device_pointer(const void* p, const char* what) {
  if (p == nullptr) throw Error(fmt::format("get_rows: {} is null", what));
  cudaPointerAttributes attr{};
  LLMCTL_CUDA_CHECK(cudaPointerGetAttributes(&attr, p));
  if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged)
    throw Error(fmt::format("get_rows: {} must be device memory, got a host pointer", what));
}

}  // namespace

// Exactly the kernels launch_get_rows_device_ids dispatches to (CudaBackend::
// supports_weight_type lists the same): not is_engine_type, which grows with CPU-only formats.
bool get_rows_supports(GgmlType type) {
  switch (type) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::Q8_0:
    case GgmlType::Q4_0:
    case GgmlType::Q4_1:
    case GgmlType::MXFP4:
      return true;
    default:
      return false;
  }
}

size_t get_rows_row_bytes(GgmlType type, int64_t row_len) {
  if (!get_rows_supports(type))
    throw Error(fmt::format("get_rows: expected a table of type {}, got {}", kSupported,
                            ggml_type_name(type)));
  const GgmlTypeTraits t = ggml_traits(type);
  if (row_len <= 0 || row_len % t.block_size != 0)
    throw Error(fmt::format("get_rows: expected row_len > 0 and a multiple of {} for {}, got {}",
                            t.block_size, t.name, row_len));
  return static_cast<size_t>(row_len / t.block_size) * t.type_size;
}

void launch_get_rows_device_ids(const DeviceTable& table, const int32_t* dev_ids, int64_t n_ids,
                                float* out, cudaStream_t stream) {
  const int64_t n = table.n_rows, len = table.row_len;
  switch (table.type) {
    case GgmlType::F32:
      launch_get_rows_f32_f32(static_cast<const float*>(table.data), n, len, dev_ids, n_ids, out,
                              stream);
      break;
    case GgmlType::F16:
      launch_get_rows_f16_f32(static_cast<const uint16_t*>(table.data), n, len, dev_ids, n_ids, out,
                              stream);
      break;
    case GgmlType::BF16:
      launch_get_rows_bf16_f32(static_cast<const uint16_t*>(table.data), n, len, dev_ids, n_ids,
                               out, stream);
      break;
    case GgmlType::Q8_0:
      launch_get_rows_q8_0_f32(table.data, n, len, dev_ids, n_ids, out, stream);
      break;
    case GgmlType::Q4_0:
      launch_get_rows_q4_0_f32(table.data, n, len, dev_ids, n_ids, out, stream);
      break;
    case GgmlType::Q4_1:
      launch_get_rows_q4_1_f32(table.data, n, len, dev_ids, n_ids, out, stream);
      break;
    case GgmlType::MXFP4:
      launch_get_rows_mxfp4_f32(table.data, n, len, dev_ids, n_ids, out, stream);
      break;
    default:
      throw Error(fmt::format("get_rows: expected a table of type {}, got {}", kSupported,
                              ggml_type_name(table.type)));
  }
  LLMCTL_CUDA_CHECK_LAUNCH();
}

void get_rows(const DeviceTable& table, const int32_t* ids, int64_t n_ids, float* out,
              cudaStream_t stream) {
  get_rows_row_bytes(table.type, table.row_len);  // type and row_len
  if (table.n_rows <= 0)
    throw Error(fmt::format("get_rows: expected a table with n_rows > 0, got {}", table.n_rows));
  if (n_ids < 0 || n_ids > std::numeric_limits<int32_t>::max())
    throw Error(fmt::format("get_rows: expected 0 <= n_ids <= {}, got {}",
                            std::numeric_limits<int32_t>::max(), n_ids));
  if (n_ids == 0) return;
  if (ids == nullptr) throw Error("get_rows: ids is null");
  if (table.row_len > std::numeric_limits<int64_t>::max() / n_ids)
    throw Error(
        fmt::format("get_rows: output of {} x {} elements overflows", n_ids, table.row_len));
  for (int64_t i = 0; i < n_ids; ++i) {
    if (ids[i] < 0 || ids[i] >= table.n_rows)
      throw Error(
          fmt::format("get_rows: id {} at position {} is out of range: expected 0 <= id < {}",
                      ids[i], i, table.n_rows));
  }
  require_device_pointer(table.data, "table");
  require_device_pointer(out, "out");
  if (reinterpret_cast<uintptr_t>(out) % 16 != 0)
    throw Error("get_rows: expected `out` 16-byte aligned (cudaMalloc memory is)");

  // Stream-ordered scratch for the ids: freed after the kernel without synchronizing.
  const size_t id_bytes = static_cast<size_t>(n_ids) * sizeof(int32_t);
  void* d_ids = nullptr;
  LLMCTL_CUDA_CHECK(cudaMallocAsync(&d_ids, id_bytes, stream));
  const auto* dev_ids = static_cast<const int32_t*>(d_ids);
  try {
    LLMCTL_CUDA_CHECK(cudaMemcpyAsync(d_ids, ids, id_bytes, cudaMemcpyHostToDevice, stream));
    launch_get_rows_device_ids(table, dev_ids, n_ids, out, stream);
  } catch (...) {
    cudaFreeAsync(d_ids, stream);
    throw;
  }
  LLMCTL_CUDA_CHECK(cudaFreeAsync(d_ids, stream));
}

}  // namespace llmctl::cuda
