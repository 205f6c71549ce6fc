#pragma once
// Test data (models/, vocab/, golden/) lives outside the repository, under the directory
// named by LLMCTL_TEST_DATA (default: ../shared beside the checkout, else the checkout itself
// once scripts/fetch-models.sh has filled its models/ and vocab/).
//
// When a file is missing, require_test_file() ends the test process with exit code 77,
// which CTest reports as skipped. With LLMCTL_REQUIRE_TEST_DATA=1 (CI) it fails instead.

#include <string>

namespace llmctl::test {

// The test data directory, or "" when it does not exist.
std::string test_data_dir();
// Full path of DIR/rel; skips (exit 77) or fails (CI) the current test when it is missing.
std::string require_test_file(const std::string& rel);
// A fresh temporary directory for this test process (removed at exit).
std::string temp_dir();
// Whole file as bytes.
std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& bytes);

}  // namespace llmctl::test
