#pragma once
// How llmctl's command line reads, for every subcommand: the help layout (no parser residue
// such as "INT:INT in [1 - 1024]" or "Excludes: --csv"), the number checks with their
// messages ("wants an integer from 0 to 1024, got -1"), CLI11's parse errors in our words,
// and the spellings of other tools (llama.cpp's -np, -sys, -ctk, -ctv) that CLI11 cannot
// declare itself.

#include <CLI/CLI.hpp>

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace llmctl::cli {

// The help formatter: an option reads "-t,--threads N=0"; choices read "{on,off}"; a
// required option says "(required)".
std::shared_ptr<CLI::Formatter> make_help_formatter();

// Number checks. The message names what the option wants and what it got; the help shows no
// trace of them (say the range in the option's description where it matters).
CLI::Validator integer_in(int64_t lo, int64_t hi);
CLI::Validator number_in(double lo, double hi, bool lo_open = false);
template <class T>
CLI::Validator in_range(T lo, T hi) {
  if constexpr (std::is_integral_v<T>)
    return integer_in(static_cast<int64_t>(lo), static_cast<int64_t>(hi));
  else
    return number_in(static_cast<double>(lo), static_cast<double>(hi));
}
template <class T>
CLI::Validator at_least(T lo) {
  return in_range<T>(lo, std::numeric_limits<T>::max());
}
// A number > 0 (--rope-theta, kvplan's GiB and GB/s).
CLI::Validator positive_number();
// One of `names`: "wants one of f16, f32, got 'q8_0'"; the help shows {f16,f32}.
CLI::Validator one_of(std::vector<std::string> names);

// CLI11's message for a parse error, in llmctl's words (without the "llmctl: error: "
// prefix): "-n wants an integer, got 'abc'" rather than "Could not convert: --n-predict = abc".
std::string usage_error_text(const CLI::App& app, const CLI::ParseError& e);

// argv with other tools' single-dash spellings (-np, -sys, -ctk, -ctv: llama.cpp's) turned into
// the long names llmctl declares; "-np=4" too. Stops at "--".
std::vector<std::string> with_long_spellings(std::vector<std::string> args);

}  // namespace llmctl::cli
