// PLACEHOLDER: `llmctl svd-embed` is being built (issue 6); this file is replaced whole.
#include <fmt/format.h>

#include <cstdio>

#include "cli/app.h"
#include "core/error.h"

namespace llmctl::cli {

void add_svd_embed_command(CLI::App& app, Action& action) {
  CLI::App* sub = app.add_subcommand("svd-embed", "Singular-value spectrum and norm statistics of the embedding matrix [not built yet]");
  sub->allow_extras();
  sub->callback([&action] {
    action = [] {
      fmt::print(stderr, "llmctl: error: 'svd-embed' is not built yet (issue 6)\n");
      return static_cast<int>(kExitError);
    };
  });
}

}  // namespace llmctl::cli
