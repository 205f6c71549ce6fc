// GPU catalog. usable_bytes is what cudaMemGetInfo (torch.cuda.mem_get_info / total_memory)
// reports as total, which is what engines budget against: less than the marketed size (ECC,
// driver reservations; "80GB" H100 -> 79.19 GiB). Bandwidth and dense (non-sparse) tensor-core
// rates are from NVIDIA's datasheets. Where a usable figure is not from a logged run it is
// nvidia-smi's total, marked "nvidia-smi" (cudaMemGetInfo reports about the same, within ~0.5%).
#include "plan/gpu_catalog.h"

#include <cmath>

#include "core/error.h"
#include "plan/model_config.h"

namespace llmctl::plan {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

GpuSpec gpu(const char* name, const char* label, double marketed_gb, double usable_gib, double bw,
            double tf16, double tf8, const char* source) {
  GpuSpec g;
  g.name = name;
  g.label = label;
  g.marketed_gb = marketed_gb;
  g.usable_bytes = static_cast<uint64_t>(std::llround(usable_gib * kGiB));
  g.bandwidth_gbs = bw;
  g.tflops_16 = tf16;
  g.tflops_8 = tf8;
  g.source = source;
  return g;
}

std::vector<GpuSpec> build() {
  std::vector<GpuSpec> g;
  // Turing / Volta
  g.push_back(gpu("t4", "Tesla T4 16GB", 16, 14.75, 320, 65, 0,
                  "torch total_memory 15,835,398,144 B (Colab); T4 datasheet"));
  g.push_back(gpu("v100-16g", "V100 SXM2 16GB", 16, 15.78, 900, 125, 0,
                  "torch total_memory 16,945,512,448 B; V100 datasheet (SXM2)"));
  g.push_back(gpu("v100-32g", "V100 SXM2 32GB", 32, 31.75, 900, 125, 0,
                  "torch total_memory 34,089,730,048 B; V100 datasheet (SXM2)"));
  // Ampere
  g.push_back(gpu("a10", "A10 24GB", 24, 22.49, 600, 125, 0, "nvidia-smi 23028 MiB; A10 datasheet"));
  g.push_back(gpu("a10g", "A10G 24GB (AWS)", 24, 22.49, 600, 70, 0,
                  "nvidia-smi 23028 MiB; AWS G5: A10G runs lower clocks, ~70 dense FP16 TFLOPS"));
  g.push_back(gpu("a100-40g-pcie", "A100 PCIe 40GB", 40, 39.39, 1555, 312, 0,
                  "torch total_memory 42,297,524,224 B; A100 datasheet"));
  g.push_back(gpu("a100-40g-sxm", "A100 SXM4 40GB", 40, 39.39, 1555, 312, 0,
                  "torch total_memory 42,297,524,224 B; A100 datasheet"));
  g.push_back(gpu("a100-80g-pcie", "A100 PCIe 80GB", 80, 79.15, 1935, 312, 0,
                  "vLLM log total_gpu_memory 79.15GiB; A100 datasheet"));
  g.push_back(gpu("a100-80g-sxm", "A100 SXM4 80GB", 80, 79.15, 2039, 312, 0,
                  "vLLM log total_gpu_memory 79.15GiB; A100 datasheet"));
  g.push_back(gpu("rtx-3090", "GeForce RTX 3090 24GB", 24, 23.69, 936, 71, 0,
                  "torch total_memory 25,438,126,080 B; GA102 whitepaper (FP16 w/ FP32 accumulate)"));
  // Ada
  g.push_back(gpu("l4", "L4 24GB", 24, 22.49, 300, 121, 242, "nvidia-smi 23034 MiB; L4 datasheet"));
  g.push_back(gpu("l40s", "L40S 48GB", 48, 44.52, 864, 362, 733, "nvidia-smi 46068 MiB; L40S datasheet"));
  g.push_back(gpu("rtx-4090", "GeForce RTX 4090 24GB", 24, 23.65, 1008, 165, 330,
                  "torch total_memory 25,393,692,672 B; Ada whitepaper"));
  // Hopper: issue 5 / vLLM logs: an H100 80GB reports 79.19 GiB (79.22 with some drivers).
  g.push_back(gpu("h100-pcie", "H100 PCIe 80GB", 80, 79.19, 2000, 756, 1513,
                  "vLLM log total_gpu_memory 79.19GiB; H100 datasheet (PCIe)"));
  g.push_back(gpu("h100-sxm", "H100 SXM 80GB", 80, 79.19, 3350, 989, 1979,
                  "vLLM log total_gpu_memory 79.19GiB; H100 datasheet (SXM)"));
  // vLLM PR #21429 log on H200: "requested GPU memory: 69.86 GiB" at gpu_memory_utilization 0.5.
  g.push_back(gpu("h200", "H200 SXM 141GB", 141, 139.72, 4800, 989, 1979,
                  "vLLM log: 69.86 GiB requested at utilization 0.5; H200 datasheet"));
  // Blackwell
  g.push_back(gpu("b200", "B200 180GB", 180, 178.35, 8000, 2250, 4500,
                  "nvidia-smi 183359 MiB less ~0.7 GiB; HGX B200 datasheet (per GPU)"));
  g.push_back(gpu("rtx-5090", "GeForce RTX 5090 32GB", 32, 31.36, 1792, 209.5, 419,
                  "torch total_memory 33,669,775,360 B; Blackwell GeForce whitepaper"));
  return g;
}

}  // namespace

const std::vector<GpuSpec>& gpu_catalog() {
  static const std::vector<GpuSpec> catalog = build();
  return catalog;
}

GpuSpec find_gpu(const std::string& name) {
  const std::string key = lowercase(name);
  // Short names people type: "h100" is the SXM part, "a100" the 80GB SXM, "3090" the RTX.
  static const std::pair<const char*, const char*> aliases[] = {
      {"h100", "h100-sxm"}, {"h100-80g", "h100-sxm"}, {"a100", "a100-80g-sxm"}, {"a100-80g", "a100-80g-sxm"},
      {"a100-40g", "a100-40g-sxm"}, {"v100", "v100-32g"}, {"3090", "rtx-3090"}, {"4090", "rtx-4090"},
      {"5090", "rtx-5090"}, {"rtx3090", "rtx-3090"}, {"rtx4090", "rtx-4090"}, {"rtx5090", "rtx-5090"},
      {"h200-sxm", "h200"}, {"b200-sxm", "b200"}, {"h100-nvl", "h100-pcie"}};
  std::string want = key;
  for (const auto& [from, to] : aliases)
    if (key == from) want = to;
  std::vector<std::string> names;
  for (const GpuSpec& g : gpu_catalog()) {
    if (g.name == want || lowercase(g.label) == key) return g;
    names.push_back(g.name);
  }
  std::string list;
  for (const std::string& n : closest_names(key, names)) list += (list.empty() ? "" : ", ") + n;
  throw Error(fmt::format("unknown GPU '{}'; closest catalog names: {}", name, list),
              "or describe it: --gpu-mem GiB --bandwidth GB/s --tflops X; `llmctl kvplan --list-gpus` shows the catalog");
}

GpuSpec custom_gpu(double mem_gib, double bandwidth_gbs, double tflops) {
  GpuSpec g;
  g.name = "custom";
  g.label = fmt::format("custom GPU ({:.2f} GiB, {:.0f} GB/s, {:.0f} TFLOPS)", mem_gib, bandwidth_gbs, tflops);
  g.marketed_gb = mem_gib;
  g.usable_bytes = static_cast<uint64_t>(std::llround(mem_gib * kGiB));
  g.bandwidth_gbs = bandwidth_gbs;
  g.tflops_16 = tflops;
  g.tflops_8 = 0;
  g.source = "command line";
  return g;
}

}  // namespace llmctl::plan
