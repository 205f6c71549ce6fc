#include "cli/app.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <exception>
#include <new>
#include <sstream>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "cli/interrupt.h"
#include "cli/standard_output.h"
#include "cli/cli_style.h"
#include "core/edit_distance.h"
#include "core/error.h"
#include "core/stop_point.h"

namespace llmctl::cli {

namespace {

// Words people type for a subcommand, from other tools (llama.cpp's llama-cli and
// llama-perplexity, ...): what to suggest instead.
constexpr std::pair<const char*, const char*> kSubcommandSynonyms[] = {
    {"generate", "run"}, {"complete", "run"},  {"chat", "run -i"},       {"main", "run"},
    {"cli", "run"},      {"perplexity", "eval"}, {"ppl", "eval"},        {"quant", "quantize"},
    {"info", "inspect"}, {"show", "inspect"},  {"benchmark", "bench"},   {"plan", "kvplan"},
    {"tokenise", "tokenize"}};

// A first argument that is neither an option nor a subcommand: "unknown subcommand 'X'", with
// the synonym or the closest name (at most 3 edits away) as a did-you-mean.
std::string unknown_subcommand_message(const std::string& word, const std::vector<std::string>& names) {
  std::string suggestion;
  for (const auto& [typed, meant] : kSubcommandSynonyms)
    if (word == typed) suggestion = meant;
  if (suggestion.empty()) {
    size_t best = 4;
    for (const std::string& n : names)
      if (const size_t d = edit_distance(word, n); d < best) {
        best = d;
        suggestion = n;
      }
  }
  std::string msg = fmt::format("unknown subcommand '{}'", word);
  if (!suggestion.empty()) msg += fmt::format("; did you mean 'llmctl {}'?", suggestion);
  return msg;
}

void print_error(const std::string& what, const std::string& hint) {
  fmt::print(stderr, "llmctl: error: {}\n", what);
  if (!hint.empty()) fmt::print(stderr, "llmctl: hint: {}\n", hint);
}

// CLI11's help goes to stdout through the same checks as everything else (standard_output.h).
template <class E>
int print_help(CLI::App& app, const E& e) {
  std::ostringstream out, err;
  const int code = app.exit(e, out, err);
  write_out(out.str());
  fmt::print(stderr, "{}", err.str());
  return finish_stdout(code);
}

// "llmctl run --help lists the options".
std::string usage_hint(const CLI::App& app) {
  const std::vector<CLI::App*> subs = app.get_subcommands();
  return fmt::format("llmctl {}--help lists the options",
                     subs.empty() ? "" : subs.front()->get_name() + " ");
}

}  // namespace

int run_app(int argc, char** argv) {
  // A reader that goes away (`llmctl inspect M | head`) is a failed write (EPIPE) that
  // standard_output.h handles quietly, in every subcommand, not death by SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  CLI::App app{"llmctl: run Llama-family language models and measure what happens inside them"};
  app.name("llmctl");
  app.require_subcommand(0, 1);
  app.fallthrough(false);
  // Inherited by every subcommand declared below: our help layout, and a repeated option
  // takes its last value (as llama.cpp and most tools; list options keep every value).
  app.formatter(make_help_formatter());
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  bool show_version = false;
  app.add_flag("--version", show_version,
               "Print version, git commit, build type, CPU features and visible GPUs");

  Action action;
  add_inspect_command(app, action);
  add_tokenize_command(app, action);
  add_run_command(app, action);
  add_kvplan_command(app, action);
  add_quantize_command(app, action);
  add_bench_command(app, action);
  add_eval_command(app, action);
  add_rope_probe_command(app, action);
  add_svd_embed_command(app, action);

  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands({})) names.push_back(sub->get_name());
  // `llmctl help [SUBCOMMAND]` is `llmctl [SUBCOMMAND] --help`; an unknown first word is named.
  std::vector<std::string> args = with_long_spellings({argv + 1, argv + argc});
  if (!args.empty() && args[0] == "help") {
    args.erase(args.begin());
    args.emplace_back("--help");
  }
  if (!args.empty() && !args[0].empty() && args[0][0] != '-' &&
      std::find(names.begin(), names.end(), args[0]) == names.end()) {
    print_error(unknown_subcommand_message(args[0], names),
                fmt::format("the subcommands are {}; llmctl --help says what each does",
                            fmt::join(names, ", ")));
    return kExitUsage;
  }
  std::reverse(args.begin(), args.end());  // CLI11 takes them last to first

  try {
    app.parse(args);
  } catch (const CLI::CallForHelp& e) {
    return print_help(app, e);
  } catch (const CLI::CallForAllHelp& e) {
    return print_help(app, e);
  } catch (const CLI::ParseError& e) {
    print_error(usage_error_text(app, e), usage_hint(app));
    return kExitUsage;
  }

  int code = kExitError;
  try {
    if (show_version) {
      print_version();
      return finish_stdout(kExitOk);
    }
    if (!action) {
      fmt::print(stderr, "{}", app.help());
      return kExitUsage;
    }
    install_exit_on_interrupt();  // Ctrl-C is exit 130 in every subcommand (interrupt.h)
    code = action();
  } catch (const Stopped& e) {
    // Ctrl-C reached a safe point (core/stop_point.h); the unwinding removed temporary files.
    // A closed stdout stops the same way: finish_stdout says whether that is an error.
    if (output_closed()) {
      code = kExitOk;
    } else {
      fmt::print(stderr, "llmctl: {}\n", e.what());
      code = kExitInterrupted;
    }
  } catch (const Error& e) {
    print_error(e.what(), e.hint());
  } catch (const CLI::ParseError& e) {
    // A subcommand validating its options after parsing.
    print_error(usage_error_text(app, e), usage_hint(app));
    return kExitUsage;
  } catch (const std::bad_alloc&) {
    print_error("out of memory", "");
  } catch (const std::system_error& e) {
    // fmt::print throws std::system_error when stdout refuses data: finish_stdout reports it
    // (or stays quiet when the reader went away).
    if (std::ferror(stdout)) {
      note_stdout_failure(e.code().value());
      code = kExitOk;
    } else {
      print_error(fmt::format("internal error: {}", e.what()),
                  "this is a bug in llmctl; please report it with the command line");
    }
  } catch (const std::exception& e) {
    print_error(fmt::format("internal error: {}", e.what()),
                "this is a bug in llmctl; please report it with the command line");
  }
  return finish_stdout(code);
}

}  // namespace llmctl::cli
