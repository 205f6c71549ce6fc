// The mixture-of-experts ops on CUDA (backend.h "mixture of experts"): not on the device yet.
// Forward refuses a model with experts on a backend whose supports_moe() is false before any
// of these runs; each still throws rather than compute nothing.
#include "backend/cuda/cuda_backend.h"
#include "core/error.h"

namespace llmctl::cuda {

namespace {
[[noreturn]] void not_yet(const char* op) {
  throw Error(std::string("backend ") + op + ": mixture-of-experts ops have no CUDA kernels yet",
              "run the model with --device cpu");
}
}  // namespace

void CudaBackend::moe_route_impl(const Buffer&, int64_t, int64_t, int64_t, bool, Buffer&,
                                 Buffer&) {
  not_yet("moe_route");
}
void CudaBackend::moe_gather_impl(const Buffer&, int64_t, const Buffer&, int64_t, int64_t, int64_t,
                                  Buffer&) {
  not_yet("moe_gather");
}
void CudaBackend::moe_scatter_impl(const Buffer&, int64_t, const Buffer&, int64_t, int64_t,
                                   Buffer&) {
  not_yet("moe_scatter");
}
void CudaBackend::moe_combine_impl(const Buffer&, const Buffer&, int64_t, int64_t, int64_t,
                                   Buffer&) {
  not_yet("moe_combine");
}
void CudaBackend::sigmoid_scale_rows_impl(Buffer&, const Buffer&, int64_t, int64_t) {
  not_yet("sigmoid_scale_rows");
}

}  // namespace llmctl::cuda
