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
// Full path of a real model that scripts/fetch-models.sh fetches from PyPI (NAME in
// ${LLMCTL_MODEL_CACHE:-~/.cache/llmctl/models}, or linked into the checkout's models/); skips
// the test (exit 77) when it has not been fetched, failing instead when
// LLMCTL_REQUIRE_FETCHED_MODELS=1.
std::string require_fetched_model(const std::string& name);
// A fresh temporary directory for this test process (removed at exit).
std::string temp_dir();
// Whole file as bytes.
std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& bytes);
// Whether a temporary file of core/output_file.h (PATH.tmp-XXXXXX) is beside path.
bool temp_file_beside(const std::string& path);

}  // namespace llmctl::test
