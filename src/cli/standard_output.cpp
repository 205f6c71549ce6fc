// What a failed write to stdout means (standard_output.h).
#include "cli/standard_output.h"

#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "cli/interrupt.h"
#include "core/error.h"

namespace llmctl::cli {

namespace {
std::atomic<int> g_stdout_errno{0};  // the first failure's errno; 0: none yet
std::atomic<bool> g_reported{false};
}  // namespace

void note_stdout_failure(int err) {
  int none = 0;
  g_stdout_errno.compare_exchange_strong(none, err != 0 ? err : EIO);
  note_output_closed();
}

void flush_out() {
  if (std::fflush(stdout) != 0) note_stdout_failure(errno);
}

void write_out(std::string_view s) {
  if (s.empty() || output_closed()) return;
  if (std::fwrite(s.data(), 1, s.size(), stdout) != s.size()) return note_stdout_failure(errno);
  flush_out();
}

int finish_stdout(int code) {
  flush_out();
  // A failure nobody recorded (the stream's error flag without an errno): say what stdio says.
  if (std::ferror(stdout) && g_stdout_errno.load() == 0) note_stdout_failure(EIO);
  const int err = g_stdout_errno.load();
  if (err == 0 || err == EPIPE) return code;  // EPIPE: the reader left; nothing to report
  if (!g_reported.exchange(true))
    fmt::print(stderr, "llmctl: error: cannot write to standard output: {}\n", std::strerror(err));
  return kExitError;
}

}  // namespace llmctl::cli
