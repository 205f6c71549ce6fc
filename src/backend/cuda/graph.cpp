// Recording forward steps into CUDA graphs (cuda_backend.h, Backend::begin_recording).
//
// Every step is captured again (capturing costs about what launching costs, and the capture
// always matches what the plain path would launch); what is saved is the instantiation: when
// the new graph has the previous one's topology (same nodes and edges; kernel arguments and
// launch shapes may differ, e.g. a block table that grew or moved), cudaGraphExecUpdate
// patches the executable graph in place, else it is instantiated anew. This is llama.cpp's
// scheme. A decode step has the same topology as long as the batch size and the kernels the
// launchers pick stay the same.
//
// Capture mode ThreadLocal: a call that is illegal under capture (a synchronous copy, a
// cudaMalloc, a sync) made from this thread fails instead of running, so a mistake shows up as
// a failed recording (and a plain step) rather than as a graph that silently differs.
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <cstdio>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/gemm.h"

namespace llmctl::cuda {

namespace {

// cuBLAS (the batch_invariant = false prefill path) is not recorded: its handle keeps its own
// workspace and state. Decline any batch one of its thresholds would send there.
bool uses_gemm(int64_t n_tokens) {
  for (const GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0,
                           GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::MXFP4})
    if (Gemm::worth_it(t, n_tokens)) return true;
  return false;
}

std::string cuda_error_text(const char* call, cudaError_t err) {
  return fmt::format("{}: {} ({})", call, cudaGetErrorName(err), cudaGetErrorString(err));
}

}  // namespace

bool CudaBackend::begin_recording(int64_t n_tokens) {
  if (!graphs_ || graph_stats_.failed || recording_) return false;
  if (gemm_ != nullptr && uses_gemm(n_tokens)) return false;
  const cudaError_t err = cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal);
  if (err != cudaSuccess) {
    give_up_recording(cuda_error_text("cudaStreamBeginCapture", err));
    return false;
  }
  recording_ = true;
  return true;
}

bool CudaBackend::end_recording() {
  if (!recording_) return false;
  recording_ = false;
  cudaGraph_t graph = nullptr;
  cudaError_t err = cudaStreamEndCapture(stream_, &graph);
  if (err != cudaSuccess || graph == nullptr) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    give_up_recording(cuda_error_text("cudaStreamEndCapture", err));
    return false;
  }
  ++graph_stats_.captured;
  bool ready = false;
  if (graph_exec_ != nullptr) {
#if CUDART_VERSION >= 12000
    cudaGraphExecUpdateResultInfo info{};
    err = cudaGraphExecUpdate(graph_exec_, graph, &info);
#else
    cudaGraphNode_t error_node = nullptr;
    cudaGraphExecUpdateResult result{};
    err = cudaGraphExecUpdate(graph_exec_, graph, &error_node, &result);
#endif
    if (err == cudaSuccess) {
      ready = true;
      ++graph_stats_.updated;
    } else {
      // Another topology: not an error, instantiate this one instead.
      (void)cudaGetLastError();
      cudaGraphExecDestroy(graph_exec_);
      graph_exec_ = nullptr;
    }
  }
  if (!ready) {
#if CUDART_VERSION >= 12000
    err = cudaGraphInstantiate(&graph_exec_, graph, 0);
#else
    err = cudaGraphInstantiate(&graph_exec_, graph, nullptr, nullptr, 0);
#endif
    if (err != cudaSuccess) {
      graph_exec_ = nullptr;
      cudaGraphDestroy(graph);
      give_up_recording(cuda_error_text("cudaGraphInstantiate", err));
      return false;
    }
    ++graph_stats_.instantiated;
  }
  cudaGraphDestroy(graph);  // the executable graph keeps what it needs
  err = cudaGraphLaunch(graph_exec_, stream_);
  if (err != cudaSuccess) {
    give_up_recording(cuda_error_text("cudaGraphLaunch", err));
    return false;
  }
  ++graph_stats_.launched;
  return true;
}

void CudaBackend::abort_recording(const char* why) {
  if (!recording_) return;
  recording_ = false;
  give_up_recording(fmt::format("a recorded op: {}", why));
}

// Leaves the stream out of capture mode, drops the executable graph, clears the (non-sticky)
// error that stopped the recording and says so once; recording stays off from then on.
void CudaBackend::give_up_recording(const std::string& why) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream_, &status) == cudaSuccess &&
      status != cudaStreamCaptureStatusNone) {
    cudaGraph_t partial = nullptr;
    cudaStreamEndCapture(stream_, &partial);
    if (partial != nullptr) cudaGraphDestroy(partial);
  }
  (void)cudaGetLastError();
  if (graph_exec_ != nullptr) {
    cudaGraphExecDestroy(graph_exec_);
    graph_exec_ = nullptr;
  }
  recording_ = false;
  graph_stats_.failed = true;
  std::fprintf(stderr,
               "llmctl: warning: CUDA graphs turned off after a failed capture (%s); decoding "
               "continues with plain kernel launches\n",
               why.c_str());
}

}  // namespace llmctl::cuda
