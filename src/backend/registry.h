#pragma once
// The one place that knows whether the CUDA backend is compiled in (registry.cpp).

#include <cstddef>
#include <string>
#include <vector>

namespace llmctl {

struct GpuInfo {
  int index = 0;
  std::string name;
  size_t total_bytes = 0;
  size_t free_bytes = 0;
  int cc_major = 0, cc_minor = 0;   // compute capability
};

struct GpuProbe {
  bool cuda_compiled = false;
  std::vector<GpuInfo> gpus;        // visible devices
  std::string reason;               // why there are none, e.g. "CUDA driver not found"
  int driver_version = 0;           // e.g. 12040 for 12.4; 0 when unknown
  int runtime_version = 0;
};

// Asks the CUDA runtime (when compiled in) which GPUs are visible. Never throws.
GpuProbe probe_gpus();

}  // namespace llmctl
