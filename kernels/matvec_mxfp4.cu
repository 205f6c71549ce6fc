// matvec for MXFP4 weights: out (n_tokens, d) = x (n_tokens, n) @ W^T (kernels/matvec.cuh).

#include "kernels/kernels.h"
#include "kernels/matvec.cuh"

namespace llmctl::cuda {

void launch_matvec_mxfp4_f32(const void* w, int64_t d, int64_t n, const float* x,
                             int64_t n_tokens, float* out, cudaStream_t stream) {
  launch_matvec<FormatMxfp4>(w, d, n, x, n_tokens, out, stream);
}

}  // namespace llmctl::cuda
