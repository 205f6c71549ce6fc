#pragma once
// CPU features: what this binary was compiled to assume, and what the running CPU offers.

#include <cstdint>
#include <string>
#include <vector>

namespace llmctl {

struct CpuFeatures {
  bool sse42 = false, avx = false, avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512_vnni = false, avx512_bf16 = false, avx512_fp16 = false;
  bool avx_vnni = false;
  bool amx = false;  // detected and reported only: nothing in llmctl issues AMX instructions
  // The vendor, for tuning that differs between Intel and AMD cores of the same ISA (the
  // matmul decode prefetch, decode_prefetch_bytes in backend/cpu/matmul_kernels.h).
  bool intel = false;
};

// Detected once at run time (cpuid through the compiler's builtins).
const CpuFeatures& cpu_features();
// Names of the detected features, e.g. {"sse4.2", "avx2", "fma", ...}.
std::vector<std::string> cpu_feature_names(const CpuFeatures& f);
// Instruction-set extensions the compiler was allowed to use for this binary (-m flags).
std::vector<std::string> compiled_cpu_features();
// The CPU model string, or "unknown".
std::string cpu_model_name();
// The size of the largest cache CPU 0 sees (its last level: L3, or L2 where there is none), from
// Linux's sysfs; 0 when unknown. Not glibc's sysconf, which reports 320 MiB of "L3" for a
// 32 MiB EPYC CCX: more than one core can use.
int64_t cpu_largest_cache_bytes();
// The size of CPU 0's cache at `level` (1: its L1 data or instruction cache, the larger; 2:
// its L2, per core on x86), from the same sysfs entries; 0 when unknown or level < 1.
int64_t cpu_cache_bytes(int level);

}  // namespace llmctl
