#pragma once
// How `llmctl eval` shows its result: a few aligned lines for people, or one JSON object.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "diag/eval.h"

namespace llmctl {

// What was evaluated, beside the numbers.
struct EvalSubject {
  std::string model;
  std::string base;      // "" without --base
  std::string text;      // file path, "-" or "builtin:NAME"
  int64_t n_tokens = 0;  // text tokens (without BOS)
  int64_t ctx = 0;
  bool bos = false;
  int64_t n_vocab = 0;
  EvalScoring scoring = EvalScoring::Llmctl;
  std::string imatrix;  // --save-imatrix path, or ""
  std::string kv_type = "f32";       // the model's KV cache (kv_types_label)
  std::string base_kv_type = "f32";  // the base's
};

std::string eval_text_report(const EvalSubject& s, const EvalResult& r);
// Keys: model, kv_type, text, n_tokens, ctx, bos, scoring ("llmctl" or "llama-cpp"), n_windows, n_scored, mean_nll, ppl;
// with a base: base, base_kv_type, base_ppl, base_mean_nll, top_k, kl_lower_bound (true unless top_k == n_vocab),
// kl {mean, median, p99, max}, top1_agreement, mean_delta_p; imatrix when one was saved.
nlohmann::json eval_json(const EvalSubject& s, const EvalResult& r);

}  // namespace llmctl
