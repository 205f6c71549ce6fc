#include "backend/registry.h"

#include <fmt/format.h>
#include <sched.h>

#include <thread>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_fast_backend.h"
#include "core/error.h"

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

int default_cpu_threads() {
  // The cores this process may run on (taskset, cgroups' cpusets), not the machine's.
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  const unsigned hc = std::thread::hardware_concurrency();
  return hc > 0 ? static_cast<int>(hc) : 1;
}

std::unique_ptr<Backend> make_backend(const BackendChoice& choice) {
  if (choice.n_threads < 0 || choice.n_threads > 1024)
    throw Error(fmt::format("{} threads: expected 1 to 1024 (0 = all cores)", choice.n_threads));
  const bool cuda = choice.device == "cuda" || choice.device.rfind("cuda:", 0) == 0;
  if (cuda) {
    const GpuProbe probe = probe_gpus();
    throw Error(
        fmt::format("device '{}': the CUDA backend is not built yet ({})", choice.device,
                    probe.gpus.empty() ? probe.reason
                                       : fmt::format("{} GPU(s) visible", probe.gpus.size())),
        "use --device cpu");
  }
  if (choice.device != "cpu" && choice.device != "auto")
    throw Error(fmt::format("unknown device '{}'", choice.device),
                "use --device auto, cpu or cuda[:N]");
  if (choice.cpu_reference) return std::make_unique<cpu::CpuBackend>();
  const int n = choice.n_threads > 0 ? choice.n_threads : default_cpu_threads();
  return std::make_unique<cpu::CpuFastBackend>(n);
}

}  // namespace llmctl
