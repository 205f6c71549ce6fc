#include "backend/gpu_gram_eigen.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "core/byte_size.h"
#include "core/error.h"

namespace llmctl {

GpuGramMemoryPlan plan_gpu_gram_memory(int64_t m, int64_t n, size_t workspace_bytes,
                                       size_t free_bytes, size_t total_bytes,
                                       size_t max_block_bytes) {
  if (n < 1 || m < n)
    throw Error(fmt::format("GPU Gram: expected a tall matrix (m >= n >= 1), got {} x {}", m, n));
  // cuBLAS and cuSOLVER take 32-bit sizes: n, the leading dimensions, the block rows.
  if (n > std::numeric_limits<int>::max())
    throw Error(fmt::format("GPU Gram: n_embd {} exceeds cuSOLVER's 32-bit sizes", n));
  GpuGramMemoryPlan p;
  const auto un = static_cast<size_t>(n);
  p.gram_bytes = un * un * sizeof(double);
  p.eigenvalue_bytes = un * sizeof(double);
  p.workspace_bytes = workspace_bytes;
  p.info_bytes = sizeof(int);
  p.reserve_bytes = kGpuGramReserveBytes;
  const size_t row_bytes = un * sizeof(double);
  const size_t fixed = p.gram_bytes + p.eigenvalue_bytes + p.workspace_bytes + p.info_bytes;
  const int64_t min_rows = std::min(m, kGpuGramMinBlockRows);
  // Rows of the block that fit in what the fixed buffers and the reserve leave.
  const size_t spare =
      free_bytes > fixed + p.reserve_bytes ? free_bytes - fixed - p.reserve_bytes : 0;
  const auto fit_rows = static_cast<int64_t>(
      std::min<size_t>(spare / row_bytes, static_cast<size_t>(std::numeric_limits<int>::max())));
  const auto cap_rows = static_cast<int64_t>(std::max<size_t>(1, max_block_bytes / row_bytes));
  p.block_rows = std::min({m, fit_rows, std::max(cap_rows, min_rows)});
  if (p.block_rows < min_rows) {
    p.block_rows = min_rows;
    p.block_bytes = static_cast<size_t>(min_rows) * row_bytes;
    const size_t need = p.total() + p.reserve_bytes;
    throw Error(
        fmt::format("GPU memory: svd-embed's float64 Gram of a {} x {} matrix needs {} (Gram "
                    "matrix {}, eigensolver workspace {}, a block of {} rows {}, {} kept "
                    "for cuBLAS/cuSOLVER) but only {} of {} are free ({} short)",
                    m, n, format_bytes(need), format_bytes(p.gram_bytes),
                    format_bytes(p.workspace_bytes), min_rows, format_bytes(p.block_bytes),
                    format_bytes(p.reserve_bytes), format_bytes(free_bytes),
                    format_bytes(total_bytes), format_bytes(need - free_bytes)),
        "free GPU memory (other processes), use a GPU with more memory, or use --device cpu");
  }
  p.block_bytes = static_cast<size_t>(p.block_rows) * row_bytes;
  return p;
}

}  // namespace llmctl
