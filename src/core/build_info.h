#pragma once
// Facts about this build, generated at build time by cmake/build_info.cmake.

namespace llmctl {

struct BuildInfo {
  const char* version;       // project version, e.g. "0.1.0"
  const char* git_commit;    // short hash, "-dirty" when the tree had changes, or "unknown"
  const char* build_type;    // CMAKE_BUILD_TYPE
  bool cuda_compiled;        // the CUDA backend is linked in
  const char* cuda_archs;    // e.g. "80,86,89,90"
};

const BuildInfo& build_info();

}  // namespace llmctl
