// llmctl --version: what was built, for which CPU, and which GPUs this process can see.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "backend/cpu/matmul_fast.h"
#include "backend/selection.h"
#include "cli/app.h"
#include "core/build_info.h"
#include "core/cpu_features.h"

namespace llmctl::cli {

void print_version() {
  const BuildInfo& b = build_info();
  fmt::print("llmctl {} (git {}, {} build)\n", b.version, b.git_commit, b.build_type);
  fmt::print("cpu: {}\n", cpu_model_name());
  fmt::print("cpu features compiled in: {}\n", fmt::join(compiled_cpu_features(), " "));
  fmt::print("cpu features detected: {}\n", fmt::join(cpu_feature_names(cpu_features()), " "));
  fmt::print("cpu matmul isa: {} (e.g. {}; LLMCTL_MATMUL_ISA overrides)\n",
             cpu::matmul_isa_name(cpu::matmul_fast_auto_isa()),
             cpu::matmul_fast_kernel_name(GgmlType::Q4_0));
  if (b.cuda_compiled)
    fmt::print("cuda: compiled in (architectures {})\n", b.cuda_archs);
  else
    fmt::print("cuda: not compiled in\n");
  const GpuProbe probe = probe_gpus();
  if (probe.gpus.empty()) {
    fmt::print("gpus: none ({})\n", probe.reason);
    return;
  }
  for (const GpuInfo& g : probe.gpus)
    fmt::print("gpu {}: {} (compute {}.{}, {:.2f} GiB total, {:.2f} GiB free)\n", g.index, g.name,
               g.cc_major, g.cc_minor, static_cast<double>(g.total_bytes) / (1u << 30),
               static_cast<double>(g.free_bytes) / (1u << 30));
}

}  // namespace llmctl::cli
