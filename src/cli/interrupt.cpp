// SIGINT and SIGPIPE handling (interrupt.h).
#include "cli/interrupt.h"

#include <atomic>
#include <csignal>

namespace llmctl::cli {

namespace {
std::atomic<bool> g_interrupted{false};
std::atomic<bool> g_output_closed{false};

extern "C" void on_sigint(int) {
  if (g_interrupted.exchange(true)) {  // the second Ctrl-C: die now
    std::signal(SIGINT, SIG_DFL);
    std::raise(SIGINT);
  }
}
}  // namespace

void install_interrupt_handler() {
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // a blocked read resumes; generation polls the flag
  sigaction(SIGINT, &sa, nullptr);
}

bool interrupted() { return g_interrupted.load(std::memory_order_relaxed); }
void clear_interrupt() { g_interrupted.store(false); }

void note_output_closed() {
  g_output_closed.store(true);
  g_interrupted.store(true);
}
bool output_closed() { return g_output_closed.load(); }

}  // namespace llmctl::cli
