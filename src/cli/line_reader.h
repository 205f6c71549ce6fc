#pragma once
// Lines from standard input for `run -i`: through libedit (line editing, history with the arrow
// keys) when stdin is a terminal, plain std::getline otherwise (scripted chats read to EOF).

#include <optional>
#include <string>

namespace llmctl::cli {

class LineReader {
 public:
  LineReader();  // decides once whether stdin is a terminal
  // The next line without its newline (a trailing CR removed); nullopt at EOF. `prompt` is
  // shown only on a terminal.
  std::optional<std::string> read(const char* prompt);
  bool terminal() const { return terminal_; }

 private:
  bool terminal_;
};

}  // namespace llmctl::cli
