// bench_get_rows: bandwidth of the get_rows kernel (kernels/dequantize_rows.cu).
//
//   bench_get_rows [--rows N] [--cols N] [--ids N] [--runs N] [--types Q4_0,Q8_0,F16]
//
// For each type: a random n_rows x row_len table on the device, n_ids random ids, then `runs`
// timed launches (cudaEvents around each, after warm-up). GB/s = (table bytes read + fp32
// bytes written + id bytes) / median time. Prints one line per type and a summary line.
// Exits 77 when no GPU is visible (like tests/gpu/test_gpu).
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "backend/cuda/buffer.h"
#include "backend/cuda/check.h"
#include "backend/cuda/device.h"
#include "backend/cuda/get_rows.h"
#include "core/error.h"
#include "kernels/kernels.h"

namespace {

using llmctl::GgmlType;
using llmctl::cuda::DeviceBuffer;

struct Options {
  int64_t n_rows = 32000, row_len = 4096, n_ids = 4096;
  int runs = 50;
  std::vector<GgmlType> types{GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::F16};
};

uint64_t next_random(uint64_t& s) {  // xorshift64*: fast enough to fill 250 MB tables
  s ^= s >> 12;
  s ^= s << 25;
  s ^= s >> 27;
  return s * 2685821657736338717ull;
}

void launch(GgmlType type, const void* table, const Options& o, const int32_t* ids, float* out) {
  using namespace llmctl::cuda;
  switch (type) {
    case GgmlType::F32:
      launch_get_rows_f32_f32(static_cast<const float*>(table), o.n_rows, o.row_len, ids, o.n_ids,
                              out, nullptr);
      break;
    case GgmlType::F16:
      launch_get_rows_f16_f32(static_cast<const uint16_t*>(table), o.n_rows, o.row_len, ids,
                              o.n_ids, out, nullptr);
      break;
    case GgmlType::BF16:
      launch_get_rows_bf16_f32(static_cast<const uint16_t*>(table), o.n_rows, o.row_len, ids,
                               o.n_ids, out, nullptr);
      break;
    case GgmlType::Q8_0:
      launch_get_rows_q8_0_f32(table, o.n_rows, o.row_len, ids, o.n_ids, out, nullptr);
      break;
    case GgmlType::Q4_0:
      launch_get_rows_q4_0_f32(table, o.n_rows, o.row_len, ids, o.n_ids, out, nullptr);
      break;
    case GgmlType::Q4_1:
      launch_get_rows_q4_1_f32(table, o.n_rows, o.row_len, ids, o.n_ids, out, nullptr);
      break;
    default:
      throw llmctl::Error(
          fmt::format("bench_get_rows: unsupported type {}", llmctl::ggml_type_name(type)));
  }
  LLMCTL_CUDA_CHECK_LAUNCH();
}

// Median seconds of one launch; also checks the wrapper path once (it validates ids).
double time_type(GgmlType type, const Options& o, double& gbps) {
  const size_t row_bytes = llmctl::cuda::get_rows_row_bytes(type, o.row_len);
  const size_t table_bytes = row_bytes * static_cast<size_t>(o.n_rows);
  std::vector<uint64_t> host(table_bytes / 8 + 1);
  uint64_t seed = 0x9e3779b97f4a7c15ull;
  for (uint64_t& w : host) w = next_random(seed);
  // Keep fp16 scales and values finite-ish: clear the top exponent bit of every 16-bit word.
  for (uint64_t& w : host) w &= 0xbfffbfffbfffbfffull;
  DeviceBuffer table(table_bytes);
  table.upload(host.data(), table_bytes);

  std::vector<int32_t> ids(static_cast<size_t>(o.n_ids));
  for (int32_t& id : ids)
    id = static_cast<int32_t>(next_random(seed) % static_cast<uint64_t>(o.n_rows));
  DeviceBuffer d_ids(ids.size() * sizeof(int32_t));
  d_ids.upload(ids.data(), d_ids.size());
  const size_t out_bytes = static_cast<size_t>(o.n_ids * o.row_len) * sizeof(float);
  DeviceBuffer out(out_bytes);

  llmctl::cuda::get_rows({type, table.data(), o.n_rows, o.row_len}, ids.data(), o.n_ids,
                         out.as<float>());
  for (int i = 0; i < 3; ++i) launch(type, table.data(), o, d_ids.as<int32_t>(), out.as<float>());
  LLMCTL_CUDA_CHECK(cudaDeviceSynchronize());

  cudaEvent_t start = nullptr, stop = nullptr;
  LLMCTL_CUDA_CHECK(cudaEventCreate(&start));
  LLMCTL_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<double> seconds;
  for (int r = 0; r < o.runs; ++r) {
    LLMCTL_CUDA_CHECK(cudaEventRecord(start));
    launch(type, table.data(), o, d_ids.as<int32_t>(), out.as<float>());
    LLMCTL_CUDA_CHECK(cudaEventRecord(stop));
    LLMCTL_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    LLMCTL_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    seconds.push_back(static_cast<double>(ms) * 1e-3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(seconds.begin(), seconds.end());
  const double median = seconds[seconds.size() / 2];
  const double bytes = static_cast<double>(row_bytes) * static_cast<double>(o.n_ids) +
                       static_cast<double>(out_bytes) +
                       static_cast<double>(ids.size() * sizeof(int32_t));
  gbps = bytes / median * 1e-9;
  fmt::print(
      "get_rows {:<5} table {}x{} ({:.1f} MiB), {} ids: median {:.3f} ms (min {:.3f}) over {} "
      "runs, "
      "{:.1f} MiB moved, {:.1f} GB/s\n",
      llmctl::ggml_type_name(type), o.n_rows, o.row_len,
      static_cast<double>(table_bytes) / (1 << 20), o.n_ids, median * 1e3, seconds.front() * 1e3,
      o.runs, bytes / (1 << 20), gbps);
  return median;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) throw llmctl::Error(fmt::format("bench_get_rows: {} needs a value", a));
    const std::string v = argv[++i];
    if (a == "--rows")
      o.n_rows = std::stoll(v);
    else if (a == "--cols")
      o.row_len = std::stoll(v);
    else if (a == "--ids")
      o.n_ids = std::stoll(v);
    else if (a == "--runs")
      o.runs = std::stoi(v);
    else if (a == "--types") {
      o.types.clear();
      size_t pos = 0;
      while (pos <= v.size()) {
        const size_t comma = std::min(v.find(',', pos), v.size());
        const auto t = llmctl::ggml_type_from_name(v.substr(pos, comma - pos));
        if (!t)
          throw llmctl::Error(
              fmt::format("bench_get_rows: unknown type '{}'", v.substr(pos, comma - pos)));
        o.types.push_back(*t);
        pos = comma + 1;
      }
    } else {
      throw llmctl::Error(fmt::format("bench_get_rows: unknown option '{}'", a));
    }
  }
  if (o.n_rows <= 0 || o.row_len <= 0 || o.n_ids <= 0 || o.runs <= 0)
    throw llmctl::Error("bench_get_rows: --rows, --cols, --ids and --runs must be positive");
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    if (llmctl::cuda::visible_device_count() == 0) {
      const llmctl::GpuProbe probe = llmctl::cuda::probe_devices();
      std::fprintf(stderr, "SKIPPED: no GPU visible (%s)\n", probe.reason.c_str());
      return 77;
    }
    std::string summary = "bench_get_rows:";
    for (GgmlType t : o.types) {
      double gbps = 0;
      time_type(t, o, gbps);
      summary += fmt::format(" {}={:.1f}GB/s", llmctl::ggml_type_name(t), gbps);
    }
    fmt::print("{}\n", summary);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_get_rows: error: %s\n", e.what());
    return 1;
  }
}
