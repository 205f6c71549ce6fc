#pragma once
// `llmctl kvplan` output: text report, sweep table, JSON, SVG, and the --measure run.
// cmd_kvplan.cpp parses options and calls these; the arithmetic lives in src/plan.

#include <string>

#include <nlohmann/json.hpp>

#include "plan/memory_plan.h"
#include "plan/roofline.h"

namespace llmctl::cli {

void print_kvplan_text(const plan::PlanInputs& in, const plan::MemoryPlan& p, const plan::Roofline& r,
                       bool sweep);
nlohmann::ordered_json kvplan_json(const plan::PlanInputs& in, const plan::MemoryPlan& p,
                                   const plan::Roofline& r, bool sweep);
// Memory per GPU against context, for batch 1 and the planned batch, with the budget line.
std::string kvplan_svg(const plan::PlanInputs& in, const plan::MemoryPlan& p);
void print_model_list();
void print_gpu_list();
// Allocates the planned weights and KV cache in host memory, touches every page, and prints
// measured (RSS growth) against predicted bytes. Throws Error when RAM is too small.
int run_kvplan_measure(const plan::PlanInputs& in, const plan::MemoryPlan& p, bool json);

}  // namespace llmctl::cli
