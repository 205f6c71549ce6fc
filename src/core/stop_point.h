#pragma once
// Stopping a long computation at a safe point (Ctrl-C; cli/interrupt.h installs the handler).
//
// The CLI's SIGINT handler calls request_stop(); the long loops of the diagnostics (an eval
// window, a rope-probe chunk, a block of the Gram matrix) and of bench call stop_point(), which
// throws Stopped once a stop was requested. The stack unwinds as for any error: OutputFile
// removes its temporary file, buffers are freed, and run_app says "interrupted" and exits 130.
// Stopped is not an Error, so the code that turns an Error into a per-item failure (a
// `run --batch` line) lets it through.

#include <stdexcept>
#include <string>

namespace llmctl {

class Stopped : public std::runtime_error {
 public:
  explicit Stopped(const std::string& what = "interrupted") : std::runtime_error(what) {}
};

// Async-signal-safe (a lock-free atomic store).
void request_stop() noexcept;
bool stop_requested() noexcept;
void clear_stop() noexcept;
// Throws Stopped when a stop was requested.
void stop_point();

}  // namespace llmctl
