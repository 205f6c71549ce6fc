#pragma once
// Backend selection: which devices are visible (probe_gpus) and the backend a command runs on
// (make_backend). With gpu_utilities.cpp, the only places that know whether the CUDA backend
// is compiled in.

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace llmctl {

struct GpuInfo {
  int index = 0;
  std::string name;
  size_t total_bytes = 0;
  size_t free_bytes = 0;
  int cc_major = 0, cc_minor = 0;  // compute capability
};

struct GpuProbe {
  bool cuda_compiled = false;
  std::vector<GpuInfo> gpus;  // visible devices
  std::string reason;         // why there are none, e.g. "CUDA driver not found"
  int driver_version = 0;     // e.g. 12040 for 12.4; 0 when unknown
  int runtime_version = 0;
};

// Asks the CUDA runtime (when compiled in) which GPUs are visible. Never throws.
GpuProbe probe_gpus();

// Which backend to build (the --device / -t / --cpu-reference options of run, bench ...).
struct BackendChoice {
  std::string device = "cpu";  // "cpu", "cuda", "cuda:N"; "auto": a visible GPU, else the CPU
  int n_threads = 0;           // CPU threads; 0: every core the process may use
  bool cpu_reference = false;  // the scalar reference backend instead of the fast one
  // CPU fast backend: f32 activations in every matmul (MatmulPrecision::Float in
  // backend/cpu/matmul_fast.h) instead of int8 (quantized weights) or f16 (F16 weights), for
  // diagnostics that must see small effects without the activation rounding (rope-probe).
  // CUDA: no effect (its batch-invariant matvecs take f32 activations already).
  bool float_activations = false;
  // CUDA: true keeps backend.h's batch invariance (every matmul a matvec, a token's results
  // bit-identical alone or batched); false sends prefill-sized matmuls through cuBLAS (f16
  // inputs, much faster prefill, results within f16 rounding that depend on the batch). The
  // default is exactness; bench --batch-invariant off measures the fast path. CPU: no effect.
  bool batch_invariant = true;
  // CUDA: record each decode step into a CUDA graph and replay it (cuda_backend.h); a failed
  // capture warns once and falls back to plain launches. Off by default until verified on a
  // GPU. CPU: no effect.
  bool cuda_graphs = false;
};

// Builds the backend. Throws Error naming the device for one that is not available, with
// the reason (not compiled in, no driver, no such GPU).
std::unique_ptr<Backend> make_backend(const BackendChoice& choice);
// Threads n_threads = 0 stands for.
int default_cpu_threads();

// The GPU index of a "cuda" / "cuda:N" device string; throws Error for anything else.
int cuda_device_index(const std::string& device);
}  // namespace llmctl
