#pragma once
// Hugging Face model directories for the loader tests: edited copies of committed fixtures,
// and what load_model says about a path.

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

namespace llmctl::test {

// A copy of fixture directory `fixture` (tests/fixtures/FIXTURE) in a fresh directory named
// `tag` under temp_dir(), its config.json edited by `edit`, every other file as it is.
std::string edited_hf_copy(const std::string& fixture, const std::string& tag,
                           const std::function<void(nlohmann::json&)>& edit);

// The message of the FileError load_model(path) throws, or "(no error)".
std::string load_model_error(const std::string& path);

}  // namespace llmctl::test
