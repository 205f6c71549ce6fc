#pragma once
// One line of a JSONL input, read the same way by every JSONL reader (run --batch,
// tokenize --report --jsonl): nlohmann/json keeps the last of a repeated key silently and
// builds values of any depth, which copying or printing (an "id") then follows by recursion
// until the stack overflows. The reader sees both.
#include <nlohmann/json.hpp>

#include <string>

namespace llmctl {

// Deeper JSON is refused: request formats need 3 levels, an "id" a few more.
inline constexpr int kMaxJsonLineDepth = 64;

struct JsonLine {
  nlohmann::json value;   // null when the text is not JSON
  std::string not_json;   // why the text is not JSON (json_error_text, one line); empty if it is
  // Empty when fine, else the message: "nested deeper than 64 levels" (do not copy or print
  // the value then), "key \"K\" appears more than once" (the value holds the last one).
  std::string too_deep;
  std::string duplicate;
};

JsonLine parse_json_line(const std::string& text);

}  // namespace llmctl
