#pragma once
// GPUs kvplan knows: the memory CUDA can actually use (cudaMemGetInfo's total, not the number
// on the box), memory bandwidth and dense tensor-core rates. Data in gpu_catalog.cpp.

#include <cstdint>
#include <string>
#include <vector>

namespace llmctl::plan {

struct GpuSpec {
  std::string name;        // catalog key ("h100-sxm")
  std::string label;       // "H100 SXM 80GB"
  double marketed_gb = 0;  // the number on the box, in GB or GiB as marketed (for --explain)
  uint64_t usable_bytes = 0;  // cudaMemGetInfo total
  double bandwidth_gbs = 0;   // GB/s (1e9 bytes)
  double tflops_16 = 0;       // dense FP16/BF16 tensor TFLOPS (no sparsity)
  double tflops_8 = 0;        // dense FP8 tensor TFLOPS; 0 when the GPU has no FP8
  std::string source;
};

const std::vector<GpuSpec>& gpu_catalog();
// By name, case-insensitive ("H100", "h100-sxm", "a100-80g-sxm"); throws Error listing close names.
GpuSpec find_gpu(const std::string& name);
// A GPU described on the command line (--gpu-mem GiB --bandwidth GB/s --tflops X).
GpuSpec custom_gpu(double mem_gib, double bandwidth_gbs, double tflops);

}  // namespace llmctl::plan
