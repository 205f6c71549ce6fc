// LineReader (line_reader.h): libedit's readline() on a terminal.
#include "cli/line_reader.h"

#include <editline/readline.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "core/text_io.h"

namespace llmctl::cli {

LineReader::LineReader() : terminal_(stdin_is_terminal()) {}

std::optional<std::string> LineReader::read(const char* prompt) {
  std::string line;
  if (terminal_) {
    // The prompt and the editing go to stderr, so stdout carries only the answers even when
    // it is redirected.
    rl_outstream = stderr;
    char* raw = readline(prompt);
    if (raw == nullptr) return std::nullopt;
    line = raw;
    std::free(raw);  // NOLINT: readline's buffer comes from malloc
    if (line.find_first_not_of(" \t") != std::string::npos) add_history(line.c_str());
  } else if (!std::getline(std::cin, line)) {
    return std::nullopt;
  }
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return line;
}

}  // namespace llmctl::cli
