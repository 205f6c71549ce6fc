#include "support/run_cli.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <stdexcept>

#include "support/test_data.h"

namespace llmctl::test {

namespace {

// stdout_path: where standard output goes; empty: a temporary file read back into out.
CliResult run(const std::vector<std::string>& args, const std::string& stdin_data,
              bool merge_stderr, const std::string& stdout_path) {
  static int counter = 0;
  const std::string base = temp_dir() + "/cli" + std::to_string(counter++);
  const std::string in_path = base + ".in", out_path = base + ".out", err_path = base + ".err";
  write_file(in_path, stdin_data);

  std::vector<std::string> argv_s{LLMCTL_BINARY_PATH};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);

  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    const int in = open(in_path.c_str(), O_RDONLY);
    const int out = stdout_path.empty() ? open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644)
                                        : open(stdout_path.c_str(), O_WRONLY);
    const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in < 0 || out < 0 || err < 0) _exit(126);
    dup2(in, 0);
    dup2(out, 1);
    dup2(merge_stderr ? out : err, 2);
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CliResult r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (stdout_path.empty()) r.out = read_file(out_path);
  r.err = read_file(err_path);
  return r;
}

}  // namespace

CliResult run_llmctl(const std::vector<std::string>& args, const std::string& stdin_data,
                     bool merge_stderr) {
  return run(args, stdin_data, merge_stderr, "");
}

CliResult run_llmctl_stdout_to(const std::string& stdout_path, const std::vector<std::string>& args,
                               const std::string& stdin_data) {
  return run(args, stdin_data, false, stdout_path);
}

}  // namespace llmctl::test
