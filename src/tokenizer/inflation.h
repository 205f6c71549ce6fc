#pragma once
// Token inflation: how many tokens the same prompts cost under different tokenizers.
// Tokens are counted without BOS/EOS (the content only), so the first tokenizer is the base
// every other one is compared with: inflation % = (tokens - base) / base * 100.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace llmctl {

struct Prompt {
  std::string label;  // "line 3", or the "id" field of a JSONL record
  std::string text;
};

// One prompt per line; empty lines are skipped; a trailing "\r" is dropped (CRLF files).
std::vector<Prompt> prompts_from_lines(const std::string& content);
// One JSON value per non-empty line: a string, or an object with a string "prompt" or "text"
// (and optionally "id"). Throws FileError("NAME:LINE: ...") for anything else.
std::vector<Prompt> prompts_from_jsonl(const std::string& content, const std::string& name);

struct InflationRow {
  std::string label;
  int64_t chars = 0;                 // Unicode code points (an invalid byte counts as one)
  int64_t bytes = 0;                 // UTF-8 bytes
  std::vector<int64_t> tokens;       // per tokenizer
  bool over_budget = false;          // some tokenizer needs more than the budget
  // chars / tokens, or nullopt for 0 tokens
  std::optional<double> chars_per_token(size_t t) const;
  // % more tokens than tokenizer 0, or nullopt when tokenizer 0 gives 0 tokens
  std::optional<double> inflation_pct(size_t t) const;
};

struct InflationReport {
  std::vector<InflationRow> rows;
  InflationRow total;                // sums over all prompts (over_budget: any prompt over)
  std::optional<int64_t> budget;
  int64_t n_over_budget = 0;
};

InflationReport measure_inflation(const std::vector<const Tokenizer*>& tokenizers,
                                  const std::vector<Prompt>& prompts, std::optional<int64_t> budget);

// Number of code points in a UTF-8 string; each invalid byte counts as one.
int64_t count_code_points(const std::string& s);

}  // namespace llmctl
