#include "io/json_line.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "io/json_error.h"

namespace llmctl {

JsonLine parse_json_line(const std::string& text) {
  using json = nlohmann::json;
  JsonLine out;
  std::string duplicate;
  int max_depth = 0;
  try {
    // The callback sees every key and every level before the value is built further.
    std::set<std::string> seen;
    out.value = json::parse(text, [&](int depth, json::parse_event_t event, json& parsed) {
      max_depth = std::max(max_depth, depth);
      if (event == json::parse_event_t::key && depth == 1 && duplicate.empty() &&
          !seen.insert(parsed.get<std::string>()).second)
        duplicate = parsed.get<std::string>();
      return true;
    });
  } catch (const json::exception& e) {
    out.value = nullptr;
    out.not_json = json_error_text(e.what(), /*one_line=*/true);
    return out;
  }
  if (max_depth > kMaxJsonLineDepth)
    out.too_deep = fmt::format("nested deeper than {} levels", kMaxJsonLineDepth);
  if (!duplicate.empty())
    out.duplicate = fmt::format("key {} appears more than once",
                              json(duplicate).dump(-1, ' ', false, json::error_handler_t::replace));
  return out;
}

}  // namespace llmctl
