#pragma once
// Runs the built llmctl binary as a child process, for CLI tests.

#include <string>
#include <vector>

namespace llmctl::test {

struct CliResult {
  int code = -1;    // exit status; 128+N when killed by signal N
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs `llmctl args...` with `stdin_data` on standard input (empty: /dev/null-like EOF).
// `merge_stderr`: standard error goes to the same file as standard output (`2>&1`), into out.
CliResult run_llmctl(const std::vector<std::string>& args, const std::string& stdin_data = "",
                     bool merge_stderr = false);
// The same with standard output opened from an existing path (/dev/full, a FIFO ...), as
// `> PATH` would; out stays empty.
CliResult run_llmctl_stdout_to(const std::string& stdout_path, const std::vector<std::string>& args,
                               const std::string& stdin_data = "");

}  // namespace llmctl::test
