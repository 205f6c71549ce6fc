#include "backend/registry.h"

#if defined(LLMCTL_HAVE_CUDA)
#include "backend/cuda/device.h"
#endif

namespace llmctl {

GpuProbe probe_gpus() {
  GpuProbe probe;
#if defined(LLMCTL_HAVE_CUDA)
  probe = cuda::probe_devices();
  probe.cuda_compiled = true;
#else
  probe.cuda_compiled = false;
  probe.reason = "CUDA support not compiled in (configure with -DLLMCTL_CUDA=ON)";
#endif
  return probe;
}

}  // namespace llmctl
