#include "support/vocab_cases.h"

#include <cstdio>
#include <stdexcept>

#include "support/test_data.h"

namespace llmctl::test {

std::vector<VocabCase> parse_vocab_cases(const std::string& inp, const std::string& out) {
  static const std::string kSep = "\n__ggml_vocab_test__\n";
  std::vector<VocabCase> cases;
  size_t pos = 0;
  for (size_t hit; (hit = inp.find(kSep, pos)) != std::string::npos; pos = hit + kSep.size())
    cases.push_back({inp.substr(pos, hit - pos), {}});
  if (pos != inp.size())
    throw std::runtime_error("vocab .inp: text after the last separator (" + std::to_string(inp.size() - pos) +
                             " bytes)");

  size_t line_start = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const size_t nl = out.find('\n', line_start);
    if (nl == std::string::npos)
      throw std::runtime_error("vocab .out has " + std::to_string(i) + " lines, .inp has " +
                               std::to_string(cases.size()) + " inputs");
    const std::string line = out.substr(line_start, nl - line_start);
    line_start = nl + 1;
    size_t p = 0;
    while (p < line.size()) {
      if (line[p] == ' ' || line[p] == '\r') {
        ++p;
        continue;
      }
      size_t used = 0;
      long long v = 0;
      try {
        v = std::stoll(line.substr(p), &used);
      } catch (const std::exception&) {
        throw std::runtime_error("vocab .out line " + std::to_string(i + 1) + ": not an id: " + line);
      }
      if (v < INT32_MIN || v > INT32_MAX)
        throw std::runtime_error("vocab .out line " + std::to_string(i + 1) + ": id out of range");
      cases[i].ids.push_back(static_cast<int32_t>(v));
      p += used;
    }
  }
  if (out.find_first_not_of("\n", line_start) != std::string::npos)
    throw std::runtime_error("vocab .out has more lines than .inp has inputs (" + std::to_string(cases.size()) + ")");
  return cases;
}

std::vector<VocabCase> load_vocab_cases(const std::string& vocab_rel) {
  const std::string inp = read_file(require_test_file(vocab_rel + ".inp"));
  const std::string out = read_file(require_test_file(vocab_rel + ".out"));
  return parse_vocab_cases(inp, out);
}

std::string escape_for_message(const std::string& text) {
  std::string s;
  for (const char c : text) {
    switch (c) {
      case '\n': s += "\\n"; break;
      case '\t': s += "\\t"; break;
      case '\r': s += "\\r"; break;
      case '"': s += "\\\""; break;
      case '\\': s += "\\\\"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          s += buf;
        } else {
          s += c;
        }
    }
  }
  return "\"" + s + "\"";
}

}  // namespace llmctl::test
