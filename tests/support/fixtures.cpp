#include "support/fixtures.h"

#include <catch2/catch.hpp>
#include <filesystem>

namespace fs = std::filesystem;

namespace llmctl::test {

std::string fixture_path(const std::string& rel) {
  const fs::path path = fs::path(LLMCTL_SOURCE_DIR) / "tests" / "fixtures" / rel;
  if (!fs::exists(path)) FAIL("committed fixture missing: " + path.string());
  return path.string();
}

}  // namespace llmctl::test
