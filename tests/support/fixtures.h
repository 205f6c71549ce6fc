#pragma once
// Committed test fixtures (tests/fixtures/), found relative to the source tree, unlike the
// large test data under LLMCTL_TEST_DATA (support/test_data.h).

#include <string>

namespace llmctl::test {

// Full path of tests/fixtures/REL in the source tree. Fixtures are committed, so a missing
// one fails the current test instead of skipping it.
std::string fixture_path(const std::string& rel);

}  // namespace llmctl::test
