#pragma once
// Reading whole inputs verbatim (no newline stripped, no encoding change).

#include <string>

namespace llmctl {

// The whole file as bytes; "-" reads standard input. Throws FileError when unreadable.
std::string read_whole_file(const std::string& path);
// Whether standard input / output is an interactive terminal.
bool stdin_is_terminal();
bool stdout_is_terminal();

}  // namespace llmctl
