#include "cli/app.h"

#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <new>

#include "core/error.h"

namespace llmctl::cli {

namespace {

void print_error(const std::string& what, const std::string& hint) {
  fmt::print(stderr, "llmctl: error: {}\n", what);
  if (!hint.empty()) fmt::print(stderr, "llmctl: hint: {}\n", hint);
}

}  // namespace

int run_app(int argc, char** argv) {
  CLI::App app{"llmctl: run Llama-family language models and measure what happens inside them"};
  app.name("llmctl");
  app.require_subcommand(0, 1);
  app.fallthrough(false);
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

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);  // prints the message and "Run with --help for more information."
    return kExitUsage;
  }

  try {
    if (show_version) {
      print_version();
      return kExitOk;
    }
    if (!action) {
      fmt::print(stderr, "{}", app.help());
      return kExitUsage;
    }
    return action();
  } catch (const Error& e) {
    print_error(e.what(), e.hint());
  } catch (const CLI::ParseError& e) {
    // A subcommand validating its options after parsing.
    print_error(e.what(), "run with --help for the options");
    return kExitUsage;
  } catch (const std::bad_alloc&) {
    print_error("out of memory", "");
  } catch (const std::exception& e) {
    print_error(fmt::format("internal error: {}", e.what()),
                "this is a bug in llmctl; please report it with the command line");
  }
  return kExitError;
}

}  // namespace llmctl::cli
