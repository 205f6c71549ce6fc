#pragma once
// main() of the GPU test executables: exits 77 (CTest: skipped) when no GPU is visible, or 1
// when LLMCTL_REQUIRE_GPU=1 says a GPU is expected (scripts/gpu-check.sh); else runs Catch.
// Include it from exactly one .cpp per executable, after defining CATCH_CONFIG_RUNNER.

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "backend/cuda/device.h"

namespace llmctl::test {

inline int run_gpu_tests(int argc, char** argv, const char* name) {
  const GpuProbe probe = cuda::probe_devices();
  if (probe.gpus.empty()) {
    const char* require = std::getenv("LLMCTL_REQUIRE_GPU");
    if (require != nullptr && std::string(require) == "1") {
      std::fprintf(stderr, "FAILED: LLMCTL_REQUIRE_GPU=1 but no GPU is visible (%s)\n",
                   probe.reason.c_str());
      return 1;
    }
    std::fprintf(stderr, "SKIPPED: no GPU visible (%s)\n", probe.reason.c_str());
    return 77;
  }
  const GpuInfo& g = probe.gpus.front();
  std::printf("%s: device 0: %s (compute %d.%d)\n", name, g.name.c_str(), g.cc_major, g.cc_minor);
  return Catch::Session().run(argc, argv);
}

}  // namespace llmctl::test
