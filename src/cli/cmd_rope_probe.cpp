// PLACEHOLDER: `llmctl rope-probe` is being built (issue 6); this file is replaced whole.
#include <fmt/format.h>

#include <cstdio>

#include "cli/app.h"
#include "core/error.h"

namespace llmctl::cli {

void add_rope_probe_command(CLI::App& app, Action& action) {
  CLI::App* sub = app.add_subcommand("rope-probe", "Test that positional encoding works (shift, ablation, distance, sweep) [not built yet]");
  sub->allow_extras();
  sub->callback([&action] {
    action = [] {
      fmt::print(stderr, "llmctl: error: 'rope-probe' is not built yet (issue 6)\n");
      return static_cast<int>(kExitError);
    };
  });
}

}  // namespace llmctl::cli
