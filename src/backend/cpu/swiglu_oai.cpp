// swiglu_oai on the CPU reference backend (backend.h): gpt-oss's expert activation, element by
// element through core/activation_math.h, the expression ggml's CPU loop evaluates.
#include "backend/cpu/cpu_backend.h"
#include "core/activation_math.h"

namespace llmctl::cpu {

void CpuBackend::swiglu_oai_impl(const Buffer& gate, const Buffer& up, int64_t n, Buffer& out) {
  swiglu_oai_range(gate, up, 0, n, out);
}

void CpuBackend::swiglu_oai_range(const Buffer& gate, const Buffer& up, int64_t i0, int64_t i1,
                                  Buffer& out) {
  const float* g = gate.data();
  const float* u = up.data();
  float* o = out.data();
  for (int64_t i = i0; i < i1; ++i) o[i] = llmctl::swiglu_oai(g[i], u[i]);
}

}  // namespace llmctl::cpu
