// ImatrixCollector (imatrix_collector.h).
#include "diag/imatrix_collector.h"

namespace llmctl {

void ImatrixCollector::on_matmul_input(const WeightView& w, const ObservedBatch& /*batch*/,
                                       const float* x, int64_t n_rows) {
  // The later row views of a fused tensor (K and V of attn_qkv, up of ffn_up) multiply the
  // input already counted with the first view: llama-imatrix sees one matmul there.
  if (w.row0 != 0) return;
  m_.add(w.name, x, n_rows, w.n_cols);
}

}  // namespace llmctl
