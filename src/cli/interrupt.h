#pragma once
// Ctrl-C and a closed stdout, for the long-running commands (run, bench, eval, rope-probe,
// svd-embed, kvplan --measure; quantize has its own guard that also catches SIGTERM).
//
// install_interrupt_handler(): the first SIGINT only raises a flag (core/stop_point.h's stop
// request), which generation checks before every step (GenerateOptions::interrupted) and the
// diagnostics' loops check at their safe points (stop_point() throws Stopped, run_app prints
// "llmctl: interrupted"), so the command stops cleanly, removes its temporary files, prints
// what it has, and exits with kExitInterrupted (130). A second SIGINT
// kills the process at once, as if there were no handler. A failed write to stdout (run_app
// ignores SIGPIPE, so a reader that goes away is one too: `llmctl run ... | head -c 100`)
// turns output_closed() true and generation stops the same way; standard_output.h says what
// the failure means for the exit code.

namespace llmctl::cli {

void install_interrupt_handler();
// For the subcommands with no long work to stop cleanly (inspect, tokenize, kvplan) and the
// moments before a subcommand installs its own handler: Ctrl-C exits 130 at once (nothing to
// clean up; buffered output is dropped), as run_app installs it for every subcommand.
void install_exit_on_interrupt();
// Whether SIGINT arrived (or stdout was closed) since the last clear_interrupt().
bool interrupted();
// For -i: a Ctrl-C ends the answer being generated, not the chat.
void clear_interrupt();
// Called when stdout refuses data (standard_output.h): also sets interrupted().
void note_output_closed();
bool output_closed();

}  // namespace llmctl::cli
