// SIGINT and SIGPIPE handling (interrupt.h).
#include "cli/interrupt.h"

#include <atomic>
#include <unistd.h>

#include <csignal>

#include "core/stop_point.h"

namespace llmctl::cli {

namespace {
// The interrupted flag is core's stop request (core/stop_point.h), so library loops can stop at
// their safe points too.
std::atomic<bool> g_output_closed{false};

// SIGINT is blocked while the handler runs (no SA_NODEFER): the test and the set do not race.
extern "C" void on_sigint(int) {
  const bool second = stop_requested();
  request_stop();
  if (second) {  // the second Ctrl-C: die now
    std::signal(SIGINT, SIG_DFL);
    std::raise(SIGINT);
  }
}
extern "C" void exit_on_sigint(int) { _exit(130); }  // kExitInterrupted; async-signal-safe
}  // namespace

void install_exit_on_interrupt() {
  struct sigaction sa {};
  sa.sa_handler = exit_on_sigint;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
}

void install_interrupt_handler() {
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // a blocked read resumes; generation polls the flag
  sigaction(SIGINT, &sa, nullptr);
}

bool interrupted() { return stop_requested(); }
void clear_interrupt() { clear_stop(); }

void note_output_closed() {
  g_output_closed.store(true);
  request_stop();
}
bool output_closed() { return g_output_closed.load(); }

}  // namespace llmctl::cli
