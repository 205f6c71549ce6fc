// PLACEHOLDER: `llmctl eval` is being built (issue 7); this file is replaced whole.
#include <fmt/format.h>

#include <cstdio>

#include "cli/app.h"
#include "core/error.h"

namespace llmctl::cli {

void add_eval_command(CLI::App& app, Action& action) {
  CLI::App* sub = app.add_subcommand("eval", "Perplexity and KL divergence against a base model [not built yet]");
  sub->allow_extras();
  sub->callback([&action] {
    action = [] {
      fmt::print(stderr, "llmctl: error: 'eval' is not built yet (issue 7)\n");
      return static_cast<int>(kExitError);
    };
  });
}

}  // namespace llmctl::cli
