// Standard output, one path for every subcommand (cli/standard_output.h, issue 20 point 2): a
// write that fails (`> /dev/full`) is exit 1 with `llmctl: error: cannot write to standard
// output: REASON`, never exit 0 with nothing written, an internal error or a closed stdout; a
// reader that goes away (`| head`) is quiet.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "support/cli_process.h"
#include "support/run_cli.h"
#include "support/test_data.h"

using llmctl::test::require_test_file;
using llmctl::test::run_llmctl_stdout_to;

namespace {

bool has(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

bool have_dev_full() {
  struct stat st {};
  return ::stat("/dev/full", &st) == 0 && S_ISCHR(st.st_mode);
}

}  // namespace

TEST_CASE("every subcommand with stdout on a full device: exit 1 with the reason", "[cli]") {
  REQUIRE(have_dev_full());  // every Linux has it
  const std::string model = require_test_file("models/stories260K.gguf");
  const std::string dir = llmctl::test::temp_dir();
  const std::string text = dir + "/stdout_text.txt", batch = dir + "/stdout_batch.jsonl";
  llmctl::test::write_file(text, "Once upon a time there was a little girl named Lily. She "
                                 "liked to play in the park with her friends.\n");
  llmctl::test::write_file(batch, "{\"prompt\": \"Once\", \"n_predict\": 4}\n");
  const std::vector<std::vector<std::string>> commands{
      {"--version"},
      {"run", "--help"},
      {"inspect", model},
      {"inspect", model, "--json"},
      {"tokenize", "-m", model, "Once upon a time"},
      {"tokenize", "-m", model, "--report", "--file", text},
      {"kvplan", "-m", model},
      {"kvplan", "-m", model, "--json"},
      {"run", "-m", model, "-p", "Once", "-n", "8", "-t", "1"},
      {"run", "-m", model, "-p", "Once", "-n", "8", "-t", "1", "--json"},
      {"run", "-m", model, "--batch", batch, "-t", "1"},
      {"svd-embed", "-m", model},
      {"svd-embed", "-m", model, "--json"},
      {"bench", "-m", model, "-p", "8", "-n", "4", "-r", "1", "-t", "1", "--probe-mib", "0"},
      {"eval", "-m", model, "--text", text, "-t", "1"},
      {"eval", "-m", model, "--text", text, "-t", "1", "--json"},
      {"rope-probe", "-m", model},
      {"rope-probe", "-m", model, "--json"},
      {"quantize", model, dir + "/stdout_q8.gguf", "--type", "q8_0", "--force"},
  };
  const std::string want =
      std::string("llmctl: error: cannot write to standard output: ") + std::strerror(ENOSPC);
  for (const auto& args : commands) {
    const auto r = run_llmctl_stdout_to("/dev/full", args);
    INFO(args[0] << (args.size() > 1 ? " " + args[1] : "") << (args.size() > 2 ? " ... " + args.back() : "")
                 << "\nstderr: " << r.err);
    CHECK(r.code == 1);
    CHECK(has(r.err, want));
    CHECK_FALSE(has(r.err, "internal error"));
    CHECK_FALSE(has(r.err, "stdout was closed"));
  }
}

TEST_CASE("stdout's reader goes away in a subcommand that prints a lot: quiet exit 0", "[cli]") {
  // tokenize writes far more than a pipe holds: its writes fail with EPIPE once the reader has
  // closed (it died of SIGPIPE before).
  const std::string model = require_test_file("models/stories260K.gguf");
  const std::string text = llmctl::test::temp_dir() + "/stdout_long.txt";
  std::string long_text;
  while (long_text.size() < (1u << 20)) long_text += "Once upon a time there was a little girl. ";
  llmctl::test::write_file(text, long_text);
  llmctl::test::CliProcess p({"tokenize", "-m", model, "--file", text, "--format", "pieces"});
  REQUIRE(p.read_until(10, 60).size() >= 10);
  p.close_stdout();
  const llmctl::test::CliExit e = p.wait(60);
  INFO("stderr: " << e.err);
  REQUIRE_FALSE(e.timed_out);
  CHECK_FALSE(e.signaled);
  CHECK(e.code == 0);
  CHECK(e.err.empty());
}
