// Subcommands whose engine is not built yet. They say so and exit 1: no invented output.
#include <fmt/format.h>

#include <cstdio>

#include "cli/app.h"
#include "core/error.h"

namespace llmctl::cli {

namespace {

struct Unbuilt {
  const char* name;
  const char* description;
  const char* issue;
};

constexpr Unbuilt kUnbuilt[] = {
    {"rope-probe", "Test that positional encoding works (shift, ablation, distance, sweep)",
     "the diagnostics (issue 6)"},
    {"svd-embed", "Singular-value spectrum and norm statistics of the embedding matrix",
     "the diagnostics (issue 6)"},
};

}  // namespace

void add_unbuilt_commands(CLI::App& app, Action& action) {
  for (const Unbuilt& u : kUnbuilt) {
    CLI::App* sub = app.add_subcommand(u.name, fmt::format("{} [not built yet]", u.description));
    sub->allow_extras();  // accept the future options so the message below is what users see
    sub->callback([&action, u] {
      action = [u] {
        fmt::print(stderr, "llmctl: error: '{}' is not built yet; it arrives with {}\n", u.name,
                   u.issue);
        return static_cast<int>(kExitError);
      };
    });
  }
}

}  // namespace llmctl::cli
