#pragma once
// The llmctl command line: one CLI11 application with one file per subcommand.

#include <CLI/CLI.hpp>

#include <functional>

namespace llmctl::cli {

// Parses argv, runs the chosen subcommand and returns the process exit code.
// Catches every exception: usage errors give 2, llmctl::Error gives 1 (see core/error.h).
int run_app(int argc, char** argv);

// What a subcommand does once its options are parsed; returns the exit code.
using Action = std::function<int()>;

// Each add_*_command registers a subcommand on `app` and sets `action` when it is chosen.
void add_inspect_command(CLI::App& app, Action& action);
void add_tokenize_command(CLI::App& app, Action& action);
void add_run_command(CLI::App& app, Action& action);
void add_kvplan_command(CLI::App& app, Action& action);
void add_quantize_command(CLI::App& app, Action& action);
void add_bench_command(CLI::App& app, Action& action);
void add_rope_probe_command(CLI::App& app, Action& action);
void add_svd_embed_command(CLI::App& app, Action& action);
void add_eval_command(CLI::App& app, Action& action);
void print_version();

}  // namespace llmctl::cli
