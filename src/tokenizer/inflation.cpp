#include "tokenizer/inflation.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/json_line.h"
#include "tokenizer/utf8.h"

namespace llmctl {

std::vector<Prompt> prompts_from_lines(const std::string& content) {
  std::vector<Prompt> prompts;
  size_t start = 0;
  int64_t line_no = 0;
  while (start <= content.size()) {
    size_t end = content.find('\n', start);
    if (end == std::string::npos) end = content.size();
    ++line_no;
    std::string line = content.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) prompts.push_back({fmt::format("line {}", line_no), std::move(line)});
    if (end == content.size()) break;
    start = end + 1;
  }
  return prompts;
}

std::vector<Prompt> prompts_from_jsonl(const std::string& content, const std::string& name) {
  std::vector<Prompt> prompts;
  size_t start = 0;
  int64_t line_no = 0;
  while (start < content.size()) {
    size_t end = content.find('\n', start);
    if (end == std::string::npos) end = content.size();
    ++line_no;
    const std::string line = content.substr(start, end - start);
    start = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = fmt::format("{}:{}", name, line_no);
    // Read as run --batch reads its lines (io/json_line.h): a repeated key or a deep "id"
    // (which printing would follow until the stack overflows) is an error of that line.
    const JsonLine parsed = parse_json_line(line);
    if (!parsed.not_json.empty())
      throw Error(fmt::format("{}: invalid JSON: {}", where, utf8_sanitize(parsed.not_json)),
                  "each line must be a JSON string or an object with a \"prompt\" or \"text\" string");
    if (!parsed.too_deep.empty()) throw Error(fmt::format("{}: {}", where, parsed.too_deep));
    if (!parsed.duplicate.empty()) throw Error(fmt::format("{}: {}", where, parsed.duplicate));
    const nlohmann::json& j = parsed.value;
    if (j.is_string()) {
      prompts.push_back({fmt::format("line {}", line_no), j.get<std::string>()});
      continue;
    }
    if (!j.is_object())
      throw Error(fmt::format("{}: expected a JSON string or object, got {}", where, j.type_name()));
    const char* key = j.contains("prompt") ? "prompt" : (j.contains("text") ? "text" : nullptr);
    if (key == nullptr)
      throw Error(fmt::format("{}: object has no \"prompt\" or \"text\" field", where));
    if (!j[key].is_string())
      throw Error(fmt::format("{}: \"{}\" must be a string, got {}", where, key, j[key].type_name()));
    std::string label = fmt::format("line {}", line_no);
    if (j.contains("id")) label = j["id"].is_string() ? j["id"].get<std::string>() : j["id"].dump();
    prompts.push_back({std::move(label), j[key].get<std::string>()});
  }
  return prompts;
}

int64_t count_code_points(const std::string& s) {
  int64_t n = 0;
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t len = 1;
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) len = 3;
    else if (c >= 0xF0 && c <= 0xF4) len = 4;
    bool valid = i + len <= s.size();
    for (size_t k = 1; valid && k < len; ++k)
      valid = (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
    i += valid ? len : 1;
    ++n;
  }
  return n;
}

std::optional<double> InflationRow::chars_per_token(size_t t) const {
  if (tokens.at(t) == 0) return std::nullopt;
  return static_cast<double>(chars) / static_cast<double>(tokens[t]);
}

std::optional<double> InflationRow::inflation_pct(size_t t) const {
  if (tokens.at(0) == 0) return std::nullopt;
  return 100.0 * static_cast<double>(tokens.at(t) - tokens[0]) / static_cast<double>(tokens[0]);
}

InflationReport measure_inflation(const std::vector<const Tokenizer*>& tokenizers,
                                  const std::vector<Prompt>& prompts, std::optional<int64_t> budget) {
  LLMCTL_ASSERT(!tokenizers.empty());
  InflationReport report;
  report.budget = budget;
  report.total.label = "total";
  report.total.tokens.assign(tokenizers.size(), 0);
  for (const Prompt& p : prompts) {
    InflationRow row;
    row.label = p.label;
    row.chars = count_code_points(p.text);
    row.bytes = static_cast<int64_t>(p.text.size());
    for (const Tokenizer* t : tokenizers) {
      const auto n = static_cast<int64_t>(t->encode(p.text, /*add_bos=*/false).size());
      row.tokens.push_back(n);
      if (budget && n > *budget) row.over_budget = true;
    }
    report.total.chars += row.chars;
    report.total.bytes += row.bytes;
    for (size_t k = 0; k < row.tokens.size(); ++k) report.total.tokens[k] += row.tokens[k];
    if (row.over_budget) ++report.n_over_budget;
    report.rows.push_back(std::move(row));
  }
  report.total.over_budget = report.n_over_budget > 0;
  return report;
}

}  // namespace llmctl
