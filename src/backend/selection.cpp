// Backend selection (selection.h): the CPU backends, or the CUDA one when it is compiled in
// and the device is visible.
#include "backend/selection.h"

#include <fmt/format.h>
#include <sched.h>

#include <cstdio>
#include <string>
#include <thread>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_fast_backend.h"
#include "core/error.h"

#if defined(LLMCTL_HAVE_CUDA)
#include "backend/cuda/cuda_backend.h"
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

namespace {

// "cuda" -> 0, "cuda:N" -> N; anything else after "cuda:" is an error.
int parse_cuda_index(const std::string& device) {
  if (device == "cuda") return 0;
  const std::string digits = device.substr(5);
  if (digits.empty() || digits.size() > 4 ||
      digits.find_first_not_of("0123456789") != std::string::npos)
    throw Error(fmt::format("device '{}': expected cuda or cuda:N with N a GPU index", device),
                "use --device auto, cpu or cuda[:N]");
  return std::stoi(digits);
}

// The CUDA backend on GPU `index`, or an Error with the probe's reason.
std::unique_ptr<Backend> make_cuda_backend(const std::string& device, int index,
                                           const GpuProbe& probe, bool batch_invariant,
                                           bool graphs) {
  if (probe.gpus.empty())
    throw Error(fmt::format("device '{}': no GPU available ({})", device, probe.reason),
                "use --device cpu");
  if (index >= static_cast<int>(probe.gpus.size()))
    throw Error(fmt::format("device '{}': there is no GPU {} ({} GPU(s) visible: 0 to {})", device,
                            index, probe.gpus.size(), probe.gpus.size() - 1),
                "use --device cuda:0, or list the GPUs with llmctl --version");
#if defined(LLMCTL_HAVE_CUDA)
  return std::make_unique<cuda::CudaBackend>(probe.gpus[static_cast<size_t>(index)].index,
                                             batch_invariant, graphs);
#else
  // probe_gpus() reports no GPU when CUDA is not compiled in, so this is unreachable.
  (void)batch_invariant;
  (void)graphs;
  throw Error(fmt::format("device '{}': {}", device, probe.reason));
#endif
}

}  // namespace

int cuda_device_index(const std::string& device) {
  if (device != "cuda" && device.rfind("cuda:", 0) != 0)
    throw Error(fmt::format("device '{}': expected cuda or cuda:N", device));
  return parse_cuda_index(device);
}

std::unique_ptr<Backend> make_backend(const BackendChoice& choice) {
  if (choice.n_threads < 0 || choice.n_threads > 1024)
    throw Error(fmt::format("{} threads: expected 1 to 1024 (0 = all cores)", choice.n_threads));
  const bool cuda = choice.device == "cuda" || choice.device.rfind("cuda:", 0) == 0;
  if (cuda)
    return make_cuda_backend(choice.device, parse_cuda_index(choice.device), probe_gpus(),
                             choice.batch_invariant, choice.cuda_graphs);
  if (choice.device == "auto") {
    const GpuProbe probe = probe_gpus();
    if (!probe.gpus.empty())
      return make_cuda_backend("auto", 0, probe, choice.batch_invariant, choice.cuda_graphs);
    // Said only where a GPU could have been used: a build without CUDA has nothing to fall
    // back from, and saying so on every run would be noise.
    if (probe.cuda_compiled)
      std::fprintf(stderr, "llmctl: --device auto: no GPU (%s); using the CPU\n",
                   probe.reason.c_str());
  } else if (choice.device != "cpu") {
    throw Error(fmt::format("unknown device '{}'", choice.device),
                "use --device auto, cpu or cuda[:N]");
  }
  if (choice.cpu_reference) return std::make_unique<cpu::CpuBackend>();
  const int n = choice.n_threads > 0 ? choice.n_threads : default_cpu_threads();
  return std::make_unique<cpu::CpuFastBackend>(
      n, choice.float_activations ? cpu::MatmulPrecision::Float : cpu::MatmulPrecision::Fast);
}

}  // namespace llmctl
