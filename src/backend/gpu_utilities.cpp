// The GPU work outside the Backend seam (gpu_utilities.h): each asks probe_gpus() for the
// device, then calls into the CUDA library when it is compiled in.
#include "backend/gpu_utilities.h"

#include <fmt/format.h>

#include "backend/selection.h"
#include "core/error.h"

#if defined(LLMCTL_HAVE_CUDA)
#include "backend/cuda/probes.h"
#endif

namespace llmctl {

namespace {
// The CUDA index of visible GPU `index`, or an Error naming `what`.
int probe_target(int index, const char* what) {
  const GpuProbe probe = probe_gpus();
  if (index < 0 || index >= static_cast<int>(probe.gpus.size()))
    throw Error(fmt::format(
        "{}: there is no GPU {} ({})", what, index,
        probe.gpus.empty() ? probe.reason : fmt::format("{} visible", probe.gpus.size())));
  return probe.gpus[static_cast<size_t>(index)].index;
}
}  // namespace

double measure_gpu_copy_bandwidth(int index, size_t bytes, int runs) {
  const int device = probe_target(index, "copy-bandwidth probe");
#if defined(LLMCTL_HAVE_CUDA)
  return cuda::measure_copy_bandwidth(device, bytes, runs).gb_per_s;
#else
  (void)device;
  (void)bytes;
  (void)runs;
  throw Error("copy-bandwidth probe: CUDA support not compiled in");
#endif
}

double measure_gpu_gemm_rate(int index, int64_t size, int runs) {
  const int device = probe_target(index, "GEMM-rate probe");
#if defined(LLMCTL_HAVE_CUDA)
  return cuda::measure_gemm_rate(device, size, runs);
#else
  (void)device;
  (void)size;
  (void)runs;
  throw Error("GEMM-rate probe: CUDA support not compiled in");
#endif
}

}  // namespace llmctl
