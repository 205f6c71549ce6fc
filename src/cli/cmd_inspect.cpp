// PLACEHOLDER: replaced by the GGUF work.
#include "cli/app.h"
namespace llmctl::cli {
void add_inspect_command(CLI::App& app, Action& action) {
  CLI::App* sub = app.add_subcommand("inspect", "Show a GGUF file's metadata and tensors");
  sub->allow_extras();
  sub->callback([&action] { action = [] { return 1; }; });
}
}  // namespace llmctl::cli
