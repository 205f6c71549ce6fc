// PLACEHOLDER: `llmctl kvplan` is being built (issue 5); until then it says so and exits 1.
#include <fmt/format.h>

#include <cstdio>

#include "cli/app.h"
#include "core/error.h"

namespace llmctl::cli {

void add_kvplan_command(CLI::App& app, Action& action) {
  CLI::App* sub = app.add_subcommand(
      "kvplan", "Plan GPU memory: weights, KV cache, workspace, what fits, roofline speed [not built yet]");
  sub->allow_extras();
  sub->callback([&action] {
    action = [] {
      fmt::print(stderr, "llmctl: error: 'kvplan' is not built yet; it arrives with kvplan (issue 5)\n");
      return static_cast<int>(kExitError);
    };
  });
}

}  // namespace llmctl::cli
