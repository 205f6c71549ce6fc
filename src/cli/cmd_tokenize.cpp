// PLACEHOLDER: replaced by the tokenizer CLI work.
#include "cli/app.h"
namespace llmctl::cli {
void add_tokenize_command(CLI::App& app, Action& action) {
  CLI::App* sub = app.add_subcommand("tokenize", "Tokenize text");
  sub->allow_extras();
  sub->callback([&action] { action = [] { return 1; }; });
}
}  // namespace llmctl::cli
