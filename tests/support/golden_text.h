#pragma once
// Line-based golden fixtures (tests/fixtures/*.txt): hex strings to bytes and back, and the
// data lines of a file (blank lines and '#' comments skipped).

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "support/fixtures.h"

namespace llmctl::test {

inline std::vector<uint8_t> unhex(const std::string& s) {
  REQUIRE(s.size() % 2 == 0);
  std::vector<uint8_t> v(s.size() / 2);
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<uint8_t>(std::stoul(s.substr(2 * i, 2), nullptr, 16));
  return v;
}

inline std::string hex(const std::vector<uint8_t>& v) {
  return fmt::format("{:02x}", fmt::join(v, ""));
}

// The lines of tests/fixtures/NAME that are neither empty nor '#' comments.
inline std::vector<std::string> golden_lines(const std::string& name) {
  std::ifstream in(fixture_path(name));
  REQUIRE(in);
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line))
    if (!line.empty() && line[0] != '#') lines.push_back(line);
  return lines;
}

}  // namespace llmctl::test
