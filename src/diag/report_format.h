#pragma once
// Small formatting rules the diagnostics' tables and JSON share: a statistic that does not
// exist (NaN, no data) is "-" in a table and null in JSON (which has no NaN or infinity).

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

namespace llmctl {

inline nlohmann::json json_or_null(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json();
}

// A right-aligned fixed-point cell of `width` characters; "-" when v is not finite.
inline std::string table_cell(double v, int width, int decimals) {
  if (!std::isfinite(v)) return fmt::format("{:>{}}", "-", width);
  return fmt::format("{:>{}.{}f}", v, width, decimals);
}

}  // namespace llmctl
