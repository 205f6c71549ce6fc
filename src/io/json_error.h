#pragma once
// What a JSON reader tells the user when nlohmann/json refuses a text: its message without the
// library's "[json.exception.parse_error.101] " prefix, which is an internal code, not advice.
#include <string>

namespace llmctl {

// "[json.exception.parse_error.101] parse error at line 3, column 5: syntax error ..." ->
// "parse error at line 3, column 5: syntax error ...". one_line drops "line 1, " (an input that
// is a single line, as a JSONL record or a command-line value).
std::string json_error_text(const std::string& what, bool one_line = false);

}  // namespace llmctl
