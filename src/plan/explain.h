#pragma once
// --explain: the formulas of a plan with their numbers, and corrections where a commonly
// published error applies (attention heads for KV heads, quadratic KV growth, bits for bytes,
// marketed for usable memory, GB for GiB). Returns lines of text; printing is the caller's.

#include <string>
#include <vector>

#include "plan/memory_plan.h"
#include "plan/roofline.h"

namespace llmctl::plan {

std::vector<std::string> explain_plan(const PlanInputs& in, const MemoryPlan& p, const Roofline& r);
// "14.96 GiB (16.06 GB)"
std::string gib_gb(double bytes);
// "1 sequence", "16 sequences".
std::string sequence_count(int64_t n);

}  // namespace llmctl::plan
