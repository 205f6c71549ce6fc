// ImatrixCollector (imatrix_collector.h).
#include "diag/imatrix_collector.h"

namespace llmctl {

void ImatrixCollector::on_matmul_input(const WeightView& w, const ObservedBatch& /*batch*/,
                                       const float* x, int64_t n_rows) {
  m_.add(w.name, x, n_rows, w.n_cols);
}

}  // namespace llmctl
