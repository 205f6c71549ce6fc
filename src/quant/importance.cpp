#include "quant/importance.h"

#include "quant/quantize.h"

namespace llmctl {

ImportancePlan importance_for_plan(const QuantPlan& plan, const ImportanceMatrix& m) {
  ImportancePlan out;
  for (const TensorPlan& p : plan.tensors) {
    if (p.copy || p.shape.size() < 2 || !uses_importance(p.chosen)) continue;
    std::vector<float> w = m.column_weights(p.name, p.shape[0]);  // throws on a wrong n_cols
    if (w.empty())
      out.missing.push_back(p.name);
    else
      out.weights.emplace(p.name, std::move(w));
  }
  return out;
}

}  // namespace llmctl
