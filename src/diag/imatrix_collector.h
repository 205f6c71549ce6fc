#pragma once
// Fills an ImportanceMatrix (quant/imatrix.h) from the inputs of every matmul of a forward
// pass, through the observer hook (model/forward_observer.h), so the statistics come from
// the same kernels that serve `run` on either backend.
//
// Every matmul is collected under its weight's GGUF name, the output projection included
// (llama-imatrix leaves it out unless --process-output; `quantize --imatrix` simply finds an
// entry for it). Its input rows are only the rows whose logits were asked for, which in
// `llmctl eval` are every scored position. A fused tensor (phi3's attn_qkv, ffn_up) runs as
// row views of one weight (model/arch.h); its input is counted once, as llama-imatrix counts it.

#include <cstdint>

#include "model/forward_observer.h"
#include "quant/imatrix.h"

namespace llmctl {

class ImatrixCollector final : public ForwardObserver {
 public:
  // `m` must outlive the collector; rows are added to whatever it already holds.
  explicit ImatrixCollector(ImportanceMatrix& m) : m_(m) {}

  bool wants_matmul_inputs() const override { return true; }
  // x (n_rows, w.n_cols) -> m.add(w.name, ...). Throws Error for a weight seen before with
  // another row length, or a non-finite activation.
  void on_matmul_input(const WeightView& w, const ObservedBatch& batch, const float* x,
                       int64_t n_rows) override;

 private:
  ImportanceMatrix& m_;
};

}  // namespace llmctl
