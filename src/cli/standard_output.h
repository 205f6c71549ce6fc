#pragma once
// Standard output, one path for every subcommand: what a failed write means.
//
// Everything a subcommand prints goes to the C stream stdout (fmt::print, write_out, CLI11's
// help through run_app). A write can fail in two ways:
//   - the reader went away (`llmctl ... | head`): EPIPE, SIGPIPE being ignored (run_app).
//     Generation stops (interrupt.h) and the command ends quietly with its own exit code;
//   - anything else (`> /dev/full`, an I/O error): generation stops the same way, and the
//     command ends with exit 1 and `llmctl: error: cannot write to standard output: REASON`.
// The first failure is recorded with its errno by whoever saw it: write_out/flush_out, run_app
// when fmt::print threw (fmt's write error), or finish_stdout's final flush.

#include <string_view>

namespace llmctl::cli {

// Writes and flushes; ignores an empty string and anything after a failed write.
void write_out(std::string_view s);
// Flushes stdout, recording a failure.
void flush_out();
// Records that a write to stdout failed with errno `err` (the first failure is kept) and
// stops generation (note_output_closed).
void note_stdout_failure(int err);
// Flushes stdout and returns the exit code: `code` when every write succeeded or the reader
// went away, else kExitError after the error line (printed once, however often it is called).
int finish_stdout(int code);

}  // namespace llmctl::cli
