#pragma once
// Texts compiled into llmctl so `llmctl eval` works without a file: short simple English
// stories, written for this project (no third-party text), in the style of the TinyStories
// corpus the small test models were trained on. Two different texts, so an importance matrix
// can be collected on one and the quantized model evaluated on the other.

#include <string>
#include <string_view>
#include <vector>

namespace llmctl {

// "stories": the default evaluation text; "calibration": for --save-imatrix.
std::string_view builtin_text(std::string_view name);
// The names builtin_text() knows, for help and error messages.
std::vector<std::string> builtin_text_names();

}  // namespace llmctl
