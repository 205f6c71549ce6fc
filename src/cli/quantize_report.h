#pragma once
// What `llmctl quantize` prints: sizes by tensor type, the per-tensor error report (worst
// tensors by SNR) as text, and the whole plan + report as JSON. Printing only; the numbers
// come from quant/quant_plan.h and quant/quantize_gguf.h.

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "quant/quant_plan.h"
#include "quant/quantize_gguf.h"

namespace llmctl::cli {

// Table "type  tensors  elements  bytes" of the output, then the total against the input.
void print_size_by_type(const QuantPlan& plan);
// The plan's warnings for stderr, one line per distinct text: a warning that many tensors share
// ("tensor 'X': row length 64 is not a multiple of ...") becomes "N tensors: ... (first: 'X')".
std::vector<std::string> summarised_warnings(const std::vector<std::string>& warnings);

// The `n` tensors with the lowest SNR (measured ones only), with RMSE and max abs error.
void print_worst_tensors(const QuantPlan& plan, const std::vector<TensorError>& errors, size_t n);

// What the report says beyond the plan and the errors.
struct ReportExtras {
  std::string imatrix;                       // --imatrix path ("" without)
  std::vector<std::string> imatrix_used;     // tensors quantized with importance weights
  std::vector<std::string> imatrix_missing;  // converted to an importance type, no entry
};

// {"input", "output", "dry_run", "type", "file_type", "src_tensor_bytes", "out_tensor_bytes",
//  "by_type": [...], "warnings": [...], "tensors": [{name, shape, src_type, wanted, chosen,
//  rule, src_bytes, out_bytes, bits_per_weight, rmse, max_abs, snr_db, imatrix}], "worst":
//  [names], "imatrix": {"file", "weighted", "missing": [names]}}. The error fields appear
// only when `errors` is given; an infinite SNR is written as null; the imatrix fields only
// with an importance matrix.
nlohmann::ordered_json quantize_json(const QuantPlan& plan, const std::vector<TensorError>* errors,
                                     const std::string& input, const std::string& output,
                                     size_t n_worst, const ReportExtras* extras = nullptr);

// Indices of the `n` measured tensors with the lowest SNR, worst first (ties: input order).
std::vector<size_t> worst_tensors(const std::vector<TensorError>& errors, size_t n);

}  // namespace llmctl::cli
