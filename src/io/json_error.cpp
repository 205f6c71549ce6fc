#include "io/json_error.h"

namespace llmctl {

std::string json_error_text(const std::string& what, bool one_line) {
  std::string s = what;
  if (s.rfind("[json.exception.", 0) == 0) {
    const size_t close = s.find("] ");
    if (close != std::string::npos) s.erase(0, close + 2);
  }
  if (one_line) {
    const size_t at = s.find("at line 1, ");
    if (at != std::string::npos) s.erase(at + 3, 8);
  }
  return s;
}

}  // namespace llmctl
