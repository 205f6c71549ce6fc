#pragma once
// A running llmctl child process with its stdout on a pipe, for tests that need more than
// run_llmctl(): a timeout (a hang is a failure, not a stuck CI job), a signal sent while it
// works, a read end closed early, stdin closed. Header-only so that tests/CMakeLists.txt
// needs no change; the binary is found beside the test (BUILD/tests/test_x -> BUILD/llmctl).
//
//   CliProcess p({"run", "-m", model, ...});
//   p.read_until(1, 30);            // wait for the first output byte (or 30 s)
//   p.signal(SIGINT);
//   CliExit e = p.wait(30);         // exit code, stdout, stderr; timed_out when killed
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/test_data.h"

namespace llmctl::test {

inline std::string llmctl_binary_beside_tests() {
  const auto self = std::filesystem::read_symlink("/proc/self/exe");
  return (self.parent_path().parent_path() / "llmctl").string();
}

struct CliExit {
  int code = -1;           // exit status; 128 + N when killed by signal N
  bool signaled = false;   // died of a signal (including our SIGKILL on timeout)
  bool timed_out = false;  // did not finish in time and was killed
  std::string out, err;
};

enum class StdinMode { Data, Closed };

class CliProcess {
 public:
  explicit CliProcess(const std::vector<std::string>& args, const std::string& stdin_data = "",
                      StdinMode stdin_mode = StdinMode::Data) {
    static int counter = 0;
    const std::string base = temp_dir() + "/proc" + std::to_string(counter++);
    const std::string in_path = base + ".in";
    err_path_ = base + ".err";
    write_file(in_path, stdin_data);
    std::vector<std::string> argv_s{llmctl_binary_beside_tests()};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    int fds[2];
    if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      // The test runner may ignore or block signals; a child inherits that across exec.
      ::signal(SIGPIPE, SIG_DFL);
      ::signal(SIGINT, SIG_DFL);
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      const int err = open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (err < 0) _exit(126);
      if (stdin_mode == StdinMode::Closed) {
        close(0);
      } else {
        const int in = open(in_path.c_str(), O_RDONLY);
        if (in < 0) _exit(126);
        dup2(in, 0);
      }
      dup2(fds[1], 1);
      dup2(err, 2);
      close(fds[0]);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(fds[1]);
    out_fd_ = fds[0];
  }
  CliProcess(const CliProcess&) = delete;
  CliProcess& operator=(const CliProcess&) = delete;
  ~CliProcess() {
    if (!reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (out_fd_ >= 0) close(out_fd_);
  }

  // Reads stdout until at least n bytes have arrived in total, EOF, or timeout_s passed.
  // Returns everything read so far.
  const std::string& read_until(size_t n, double timeout_s) {
    const auto deadline = now() + timeout_s;
    while (out_fd_ >= 0 && out_.size() < n && now() < deadline)
      if (!read_some(deadline)) break;
    return out_;
  }
  // Waits until the child's stderr (a file) holds `what`, the child exits, or timeout_s pass;
  // returns whether it was seen.
  bool wait_for_stderr(const std::string& what, double timeout_s) {
    const auto deadline = now() + timeout_s;
    auto seen = [&] {  // the child creates the file after fork
      return std::filesystem::exists(err_path_) && read_file(err_path_).find(what) != std::string::npos;
    };
    while (now() < deadline && running()) {
      if (seen()) return true;
      usleep(20000);
    }
    return seen();
  }
  // Waits until llmctl (after exec) has a handler installed for `sig` (its SigCgt mask in
  // /proc/PID/status), the child exits, or timeout_s pass; returns whether it was seen. A
  // signal sent after this is handled, not the default action: no sleep of a guessed length.
  // Before exec the forked child still has the test runner's handlers (Catch2 catches
  // SIGINT), so the executable is checked first: exec resets every handler.
  bool wait_for_handler(int sig, double timeout_s) {
    const auto deadline = now() + timeout_s;
    const unsigned long long bit = 1ULL << (sig - 1);
    const std::string proc = "/proc/" + std::to_string(pid_);
    auto caught = [&] {
      std::error_code ec;
      if (std::filesystem::read_symlink(proc + "/exe", ec) != llmctl_binary_beside_tests())
        return false;
      std::ifstream status(proc + "/status");
      std::string line;
      while (std::getline(status, line))
        if (line.rfind("SigCgt:", 0) == 0)
          return (std::strtoull(line.c_str() + 7, nullptr, 16) & bit) != 0;
      return false;
    };
    while (now() < deadline && running()) {
      if (caught()) return true;
      usleep(2000);
    }
    return false;
  }
  // Closes our end of the stdout pipe: the child's next write fails with EPIPE/SIGPIPE.
  void close_stdout() {
    if (out_fd_ >= 0) close(out_fd_);
    out_fd_ = -1;
  }
  void signal(int sig) { kill(pid_, sig); }
  // Whether the child has not exited yet (an exit seen here is kept for wait()).
  bool running() {
    if (reaped_) return false;
    if (waitpid(pid_, &status_, WNOHANG) != pid_) return true;
    reaped_ = true;
    return false;
  }

  // Drains stdout (unless closed) and waits for exit; after timeout_s the child is killed
  // with SIGKILL and the result says timed_out.
  CliExit wait(double timeout_s) {
    CliExit r;
    const auto deadline = now() + timeout_s;
    while (out_fd_ >= 0 && now() < deadline)
      if (!read_some(deadline)) break;
    int status = status_;
    while (!reaped_) {
      const pid_t w = waitpid(pid_, &status, WNOHANG);
      if (w == pid_) break;
      if (now() >= deadline) {
        r.timed_out = true;
        kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
        break;
      }
      usleep(10000);
    }
    reaped_ = true;
    r.signaled = WIFSIGNALED(status);
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = out_;
    r.err = read_file(err_path_);
    return r;
  }

 private:
  static double now() {
    using namespace std::chrono;
    return duration<double>(steady_clock::now().time_since_epoch()).count();
  }
  // One poll + read; false at EOF (the pipe is then closed) or when the deadline passed.
  bool read_some(double deadline) {
    pollfd p{out_fd_, POLLIN, 0};
    const int ms = static_cast<int>((deadline - now()) * 1000.0);
    if (ms <= 0 || poll(&p, 1, ms) <= 0) return false;
    char buf[4096];
    const ssize_t k = read(out_fd_, buf, sizeof buf);
    if (k <= 0) {
      close_stdout();
      return false;
    }
    out_.append(buf, static_cast<size_t>(k));
    return true;
  }

  pid_t pid_ = -1;
  int out_fd_ = -1;
  bool reaped_ = false;
  int status_ = 0;
  std::string err_path_;
  std::string out_;
};

// run_llmctl() with a deadline: a command that does not finish in timeout_s is killed and
// reported as timed_out (a hang), never waited for forever.
inline CliExit run_llmctl_for(const std::vector<std::string>& args, double timeout_s,
                              const std::string& stdin_data = "",
                              StdinMode stdin_mode = StdinMode::Data) {
  CliProcess p(args, stdin_data, stdin_mode);
  return p.wait(timeout_s);
}

}  // namespace llmctl::test
