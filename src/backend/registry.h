#pragma once
// The one place that knows whether the CUDA backend is compiled in (registry.cpp).

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace llmctl {

struct GpuInfo {
  int index = 0;
  std::string name;
  size_t total_bytes = 0;
  size_t free_bytes = 0;
  int cc_major = 0, cc_minor = 0;  // compute capability
};

struct GpuProbe {
  bool cuda_compiled = false;
  std::vector<GpuInfo> gpus;  // visible devices
  std::string reason;         // why there are none, e.g. "CUDA driver not found"
  int driver_version = 0;     // e.g. 12040 for 12.4; 0 when unknown
  int runtime_version = 0;
};

// Asks the CUDA runtime (when compiled in) which GPUs are visible. Never throws.
GpuProbe probe_gpus();

// Which backend to build (the --device / -t / --cpu-kernels options of run, bench ...).
struct BackendChoice {
  std::string device = "cpu";  // "cpu", "cuda", "cuda:N"; "auto": a visible GPU, else the CPU
  int n_threads = 0;           // CPU threads; 0: every core the process may use
  bool cpu_reference = false;  // the scalar reference backend instead of the fast one
};

// Builds the backend. Throws Error naming the device for one that is not available, with
// the reason (not compiled in, no driver, no such GPU).
std::unique_ptr<Backend> make_backend(const BackendChoice& choice);
// Threads n_threads = 0 stands for.
int default_cpu_threads();

}  // namespace llmctl
