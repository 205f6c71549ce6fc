#include "core/cpu_features.h"

#include <algorithm>
#include <fstream>
#include <string>

namespace llmctl {

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = [] {
    CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    f.intel = __builtin_cpu_is("intel");
    f.sse42 = __builtin_cpu_supports("sse4.2");
    f.avx = __builtin_cpu_supports("avx");
    f.avx2 = __builtin_cpu_supports("avx2");
    f.fma = __builtin_cpu_supports("fma");
    f.avx512f = __builtin_cpu_supports("avx512f");
    f.avx512bw = __builtin_cpu_supports("avx512bw");
    f.avx512vl = __builtin_cpu_supports("avx512vl");
    f.avx512dq = __builtin_cpu_supports("avx512dq");
    f.avx512_vnni = __builtin_cpu_supports("avx512vnni");
    // f16c, avx512_bf16, avx512_fp16, avx-vnni and amx are not known to every compiler's
    // builtin: read cpuid. The AVX-512 ones count only when the builtin saw avx512f, which
    // includes the OS's consent to save the zmm state (xgetbv).
    unsigned a = 0, b = 0, c = 0, d = 0;
    __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(1), "c"(0));
    f.f16c = (c >> 29) & 1u;
    __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(0));
    f.avx512_fp16 = f.avx512f && ((d >> 23) & 1u);
    f.amx = (d >> 24) & 1u;  // amx-tile
    __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(1));
    f.avx_vnni = (a >> 4) & 1u;
    f.avx512_bf16 = f.avx512f && ((a >> 5) & 1u);
#endif
    return f;
  }();
  return features;
}

std::vector<std::string> cpu_feature_names(const CpuFeatures& f) {
  std::vector<std::string> names;
  const std::pair<bool, const char*> table[] = {
      {f.sse42, "sse4.2"},       {f.avx, "avx"},           {f.avx2, "avx2"},
      {f.fma, "fma"},            {f.f16c, "f16c"},         {f.avx_vnni, "avx-vnni"},
      {f.avx512f, "avx512f"},    {f.avx512bw, "avx512bw"}, {f.avx512vl, "avx512vl"},
      {f.avx512dq, "avx512dq"},  {f.avx512_vnni, "avx512-vnni"}, {f.avx512_bf16, "avx512-bf16"},
      {f.avx512_fp16, "avx512-fp16"}, {f.amx, "amx"},
  };
  for (const auto& [has, name] : table)
    if (has) names.emplace_back(name);
  return names;
}

std::vector<std::string> compiled_cpu_features() {
  std::vector<std::string> names;
#if defined(__x86_64__)
  names.emplace_back("x86-64");
#endif
#if defined(__SSE2__)
  names.emplace_back("sse2");
#endif
#if defined(__SSE4_2__)
  names.emplace_back("sse4.2");
#endif
#if defined(__AVX2__)
  names.emplace_back("avx2");
#endif
#if defined(__FMA__)
  names.emplace_back("fma");
#endif
#if defined(__F16C__)
  names.emplace_back("f16c");
#endif
#if defined(__AVX512F__)
  names.emplace_back("avx512f");
#endif
#if defined(__aarch64__)
  names.emplace_back("aarch64");
#endif
  return names;
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        auto start = line.find_first_not_of(' ', colon + 1);
        if (start != std::string::npos) return line.substr(start);
      }
    }
  }
  return "unknown";
}

namespace {

// One number of sysfs: a size ("32K", "1024K", "32768K"; "2M" on some kernels) in bytes, or a
// level ("2"); 0 when absent or unreadable.
int64_t sysfs_cache_value(int index, const char* name) {
  std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/" + name);
  std::string text;
  if (!(in >> text)) return 0;
  int64_t value = 0;
  size_t i = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i)
    value = value * 10 + (text[i] - '0');
  const char unit = i < text.size() ? text[i] : 'B';
  return value << (unit == 'K' ? 10 : unit == 'M' ? 20 : unit == 'G' ? 30 : 0);
}

// The largest of CPU 0's caches at `level`, any level when level is 0.
int64_t largest_cache(int level) {
  int64_t largest = 0;
  for (int index = 0; index < 16; ++index) {
    const int64_t size = sysfs_cache_value(index, "size");
    if (size == 0) break;
    if (level == 0 || sysfs_cache_value(index, "level") == level) largest = std::max(largest, size);
  }
  return largest;
}

}  // namespace

int64_t cpu_largest_cache_bytes() { return largest_cache(0); }

int64_t cpu_cache_bytes(int level) { return level < 1 ? 0 : largest_cache(level); }

}  // namespace llmctl
