// kvplan --measure on the CPU: allocate the planned weights and KV cache for real, touch every
// page, and compare the growth of the process's resident set with the prediction. Only the
// CPU: nothing is allocated on a GPU.
#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "cli/kvplan_report.h"
#include "core/error.h"
#include "core/stop_point.h"
#include "cli/interrupt.h"

namespace llmctl::cli {

namespace {

uint64_t page_size() { return static_cast<uint64_t>(sysconf(_SC_PAGESIZE)); }

uint64_t rss_bytes() {
  std::ifstream in("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  if (!(in >> size >> resident)) throw Error("cannot read /proc/self/statm", "--measure needs Linux /proc");
  return resident * page_size();
}

uint64_t available_ram() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  throw Error("cannot read MemAvailable from /proc/meminfo", "--measure needs Linux /proc");
}

// One anonymous mapping, every page written so that it is resident.
class TouchedBuffer {
 public:
  explicit TouchedBuffer(uint64_t bytes) : bytes_(bytes) {
    if (bytes_ == 0) return;
    ptr_ = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (ptr_ == MAP_FAILED) {
      ptr_ = nullptr;
      throw Error(fmt::format("--measure: cannot map {} bytes", bytes_));
    }
    auto* p = static_cast<volatile unsigned char*>(ptr_);
    for (uint64_t off = 0; off < bytes_; off += page_size()) p[off] = 1;
  }
  ~TouchedBuffer() {
    if (ptr_) munmap(ptr_, bytes_);
  }
  TouchedBuffer(const TouchedBuffer&) = delete;
  TouchedBuffer& operator=(const TouchedBuffer&) = delete;
  TouchedBuffer(TouchedBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr; }

 private:
  void* ptr_ = nullptr;
  uint64_t bytes_ = 0;
};

}  // namespace

int run_kvplan_measure(const plan::PlanInputs& in, const plan::MemoryPlan& p, bool json) {
  const uint64_t predicted_w = p.weights_bytes_per_gpu;
  const uint64_t predicted_kv = p.kv_bytes_needed;
  const uint64_t avail = available_ram();
  if (static_cast<double>(predicted_w + predicted_kv) > 0.8 * static_cast<double>(avail))
    throw Error(fmt::format("--measure: the plan needs {:.2f} GiB of host memory but only {:.2f} GiB is available",
                            static_cast<double>(predicted_w + predicted_kv) / plan::kGiB,
                            static_cast<double>(avail) / plan::kGiB),
                "measure a smaller plan: a small model (e.g. --model qwen2.5-0.5b or a GGUF file), "
                "a shorter --ctx or a smaller --batch (--measure allocates on the CPU only)");
  // Ctrl-C: stops between buffers (their memory is freed on the way out), exit 130.
  install_interrupt_handler();
  const uint64_t rss0 = rss_bytes();
  TouchedBuffer weights(predicted_w);
  const uint64_t rss1 = rss_bytes();
  // The KV cache as the engine lays it out: one K and one V buffer per layer (MLA: one latent
  // buffer), each holding the planned tokens of all sequences.
  std::vector<TouchedBuffer> kv;
  const auto n_layers = static_cast<uint64_t>(in.model.n_layers);
  const uint64_t per_layer = predicted_kv / n_layers;
  for (uint64_t l = 0; l < n_layers; ++l) {
    stop_point();
    if (p.kv.mla) {
      kv.emplace_back(per_layer);
    } else {
      kv.emplace_back(per_layer / 2);
      kv.emplace_back(per_layer - per_layer / 2);
    }
  }
  stop_point();
  const uint64_t rss2 = rss_bytes();
  const uint64_t measured_w = rss1 - rss0, measured_kv = rss2 - rss1;
  auto pct = [](uint64_t m, uint64_t pr) {
    return pr == 0 ? 0.0 : 100.0 * (static_cast<double>(m) - static_cast<double>(pr)) / static_cast<double>(pr);
  };
  if (json) {
    nlohmann::ordered_json j{{"device", "cpu"},
                             {"weights_predicted_bytes", predicted_w},
                             {"weights_measured_bytes", measured_w},
                             {"kv_predicted_bytes", predicted_kv},
                             {"kv_measured_bytes", measured_kv}};
    fmt::print("{}\n", j.dump(2));
  } else {
    fmt::print("measure (CPU, resident set growth after touching every page)\n");
    fmt::print("  weights   predicted {:>14} B   measured {:>14} B   {:+.2f}%\n", predicted_w, measured_w,
               pct(measured_w, predicted_w));
    fmt::print("  KV cache  predicted {:>14} B   measured {:>14} B   {:+.2f}%\n", predicted_kv, measured_kv,
               pct(measured_kv, predicted_kv));
    fmt::print("  (host memory only: --measure allocates nothing on a GPU)\n");
  }
  return kExitOk;
}

}  // namespace llmctl::cli
