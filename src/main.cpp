// llmctl: hand argv to the CLI; main() is the one place that turns errors into exit codes.
#include "cli/app.h"

int main(int argc, char** argv) { return llmctl::cli::run_app(argc, argv); }
