#pragma once
// Which tensors `llmctl quantize --imatrix FILE` quantizes with importance weights, and with
// which weights: for every tensor the plan converts (not copied) to a type whose block search
// uses them (quantize.h: uses_importance), the importance matrix's mean x_j^2 per input column
// (ImportanceMatrix::column_weights; row length = shape[0] = the matmul's input size).
// A tensor without an entry (token_embd.weight, which is looked up rather than multiplied, or
// a weight the calibration never reached) is quantized without weights and listed in
// `missing`; an entry whose column count differs from the tensor's row length is an Error.

#include <string>
#include <vector>

#include "quant/imatrix.h"
#include "quant/quant_plan.h"
#include "quant/quantize_gguf.h"

namespace llmctl {

struct ImportancePlan {
  ColumnWeights weights;             // tensor name -> (shape[0],) column weights
  std::vector<std::string> missing;  // converted with an importance type but no entry
};

ImportancePlan importance_for_plan(const QuantPlan& plan, const ImportanceMatrix& m);

}  // namespace llmctl
