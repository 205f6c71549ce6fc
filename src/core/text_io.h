#pragma once
// Reading whole inputs verbatim (no newline stripped, no encoding change).

#include <string>

namespace llmctl {

// The whole file as bytes; "-" reads standard input. Throws FileError when unreadable.
std::string read_whole_file(const std::string& path);
// Whether standard input / output is an interactive terminal.
bool stdin_is_terminal();
bool stdout_is_terminal();
// Whether standard output and standard error are the same open file (`2>&1` into a file or
// pipe), so that what goes to stderr lands right after what went to stdout.
bool stdout_shares_stderr();

}  // namespace llmctl
