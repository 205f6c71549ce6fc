// `llmctl run` under the signals and pipes a shell gives it (issue 9, runtime faults):
//   - Ctrl-C during generation: stops cleanly, prints the text so far and the summary line
//     with finish=interrupted, exits 130;
//   - the reader of stdout goes away (`llmctl run ... | head -c 20`): a quiet exit 0 with the
//     summary line, not death by SIGPIPE, no hang;
//   - --batch interrupted, then --resume: every input line ends with exactly one record.
// The generation is made long (-c 32768 -n 30000 --ignore-eos on the 260K model) so that
// it is still running when the signal arrives; every wait has a deadline so a hang fails
// the test instead of stalling CI.
#include <signal.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "support/cli_process.h"
#include "support/test_data.h"

using llmctl::test::CliExit;
using llmctl::test::CliProcess;
using llmctl::test::require_test_file;

namespace {

constexpr double kDeadline = 60.0;

std::vector<std::string> long_run(const std::string& model) {
  return {"run",    "-m",    model, "-p",    "Once upon a time",
          "-c",     "32768", "-n",  "30000", "--ignore-eos",
          "--temp", "0",     "-t",  "1"};
}

std::string last_line(const std::string& s) {
  std::string t = s;
  while (!t.empty() && t.back() == '\n') t.pop_back();
  const size_t nl = t.rfind('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

bool has(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

// Sends SIGINT and waits: the process must exit by itself (no timeout, no death by signal).
CliExit interrupt_and_wait(CliProcess& p) {
  p.signal(SIGINT);
  const CliExit e = p.wait(kDeadline);
  INFO("stderr: " << e.err);
  REQUIRE_FALSE(e.timed_out);
  CHECK_FALSE(e.signaled);
  return e;
}

}  // namespace

TEST_CASE("SIGINT during run: exit 130, the text so far, summary with finish=interrupted",
          "[cli]") {
  const std::string model = require_test_file("models/stories260K.gguf");
  CliProcess p(long_run(model));
  REQUIRE(p.read_until(20, kDeadline).size() >= 20);  // generation has started
  const CliExit e = interrupt_and_wait(p);
  INFO("stderr: " << e.err);
  CHECK(e.code == 130);
  CHECK(e.out.size() >= 20);
  const std::string summary = last_line(e.err);
  CHECK(summary.rfind("llmctl-run: ", 0) == 0);
  CHECK(has(summary, " finish=interrupted"));
  CHECK_FALSE(has(summary, " gen_tokens=0 "));
}

TEST_CASE("a second SIGINT kills at once (the default action)", "[cli]") {
  const std::string model = require_test_file("models/stories260K.gguf");
  CliProcess p(long_run(model));
  REQUIRE(p.read_until(20, kDeadline).size() >= 20);
  p.signal(SIGINT);
  p.signal(SIGINT);
  const CliExit e = p.wait(kDeadline);
  REQUIRE_FALSE(e.timed_out);
  // Either the first signal was handled and the process finished before the second arrived
  // (130), or the second one killed it (128 + SIGINT): both are prompt and clean.
  CHECK((e.code == 130 || (e.signaled && e.code == 128 + SIGINT)));
}

TEST_CASE("stdout closed by its reader: quiet exit 0, no SIGPIPE death, no hang", "[cli]") {
  // `llmctl run ... | head -c 20`: the reader has what it wanted; generation stops, the
  // summary line stays, and no error (issue 20 point 2; it was exit 1 with "stdout was closed").
  const std::string model = require_test_file("models/stories260K.gguf");
  CliProcess p(long_run(model));
  REQUIRE(p.read_until(20, kDeadline).size() >= 20);
  p.close_stdout();
  const CliExit e = p.wait(kDeadline);
  INFO("stderr: " << e.err);
  REQUIRE_FALSE(e.timed_out);
  CHECK_FALSE(e.signaled);  // 141 would be SIGPIPE
  CHECK(e.code == 0);
  CHECK_FALSE(has(e.err, "llmctl: error:"));
  CHECK_FALSE(has(e.err, "interrupted after"));
  const std::string summary = last_line(e.err);
  CHECK(summary.rfind("llmctl-run: ", 0) == 0);
}

TEST_CASE("run --batch interrupted by SIGINT, then --resume: one record per input line", "[cli]") {
  const std::string model = require_test_file("models/stories260K.gguf");
  const std::string dir = llmctl::test::temp_dir();
  const std::string in = dir + "/sig_batch.jsonl", out = dir + "/sig_batch.out.jsonl";
  const int n_lines = 6;
  // Lines 0 and 1 finish at once; 2 .. 5 run long (first pass) or short (second pass).
  auto batch = [&](int n_long) {
    std::string lines;
    for (int i = 0; i < n_lines; ++i)
      lines += "{\"prompt\": \"Once upon a time " + std::to_string(i) +
               "\", \"n_predict\": " + std::to_string(i < 2 ? 4 : n_long) + ", \"seed\": 1}\n";
    llmctl::test::write_file(in, lines);
  };
  const std::vector<std::string> base{"run",   "-m",           model, "--batch", in,           "-c",
                                      "32768", "--ignore-eos", "-t",  "1",       "--parallel", "2"};
  batch(30000);
  CliProcess p(base);
  // Records appear as requests finish: wait for the two short ones, then interrupt the
  // long ones.
  std::string so_far;
  for (int tries = 0; tries < 100 && std::count(so_far.begin(), so_far.end(), '\n') < 2; ++tries)
    so_far = p.read_until(so_far.size() + 1, kDeadline / 100);
  REQUIRE(std::count(so_far.begin(), so_far.end(), '\n') == 2);
  p.signal(SIGINT);
  const CliExit first = p.wait(kDeadline);
  INFO("first stderr: " << first.err);
  REQUIRE_FALSE(first.timed_out);
  CHECK(first.code == 130);
  CHECK(has(first.err, "4 requests have no record yet"));
  llmctl::test::write_file(out, first.out);  // as `> out` would have kept them

  batch(4);
  std::vector<std::string> args = base;
  args.insert(args.end(), {"--resume", out});
  const CliExit second = llmctl::test::run_llmctl_for(args, kDeadline);
  INFO("second stderr: " << second.err);
  REQUIRE_FALSE(second.timed_out);
  CHECK(second.code == 0);
  CHECK(has(second.err, "skipped=2"));
  std::set<int64_t> seen;
  std::istringstream all(llmctl::test::read_file(out));
  std::string line;
  int records = 0;
  while (std::getline(all, line)) {
    ++records;
    const auto j = nlohmann::json::parse(line);
    CHECK_FALSE(j.contains("error"));
    CHECK(seen.insert(j["index"].get<int64_t>()).second);  // no index answered twice
  }
  CHECK(records == n_lines);
  CHECK(seen.size() == static_cast<size_t>(n_lines));
}

TEST_CASE("a model file replaced by rename during run: the mapping keeps the old file", "[cli]") {
  // docs/reliability.md: rename-over is the safe way to update a model in use; truncating or
  // overwriting in place raises SIGBUS (documented there, not tested: it kills the process).
  const std::string model = require_test_file("models/stories260K.gguf");
  const std::string dir = llmctl::test::temp_dir();
  const std::string path = dir + "/replaced.gguf", other = dir + "/other.gguf";
  const std::string bytes = llmctl::test::read_file(model);
  llmctl::test::write_file(path, bytes);
  llmctl::test::write_file(other, bytes.substr(0, 1000));  // not even a valid file
  const std::vector<std::string> args{"run",    "-m",   path, "-p",   "Once upon a time",
                                      "-n",     "1500", "-c", "2048", "--ignore-eos",
                                      "--temp", "0",    "-t", "1"};
  const CliExit reference = llmctl::test::run_llmctl_for(args, kDeadline);
  REQUIRE(reference.code == 0);
  CliProcess p(args);
  REQUIRE(p.read_until(20, kDeadline).size() >= 20);
  REQUIRE(std::rename(other.c_str(), path.c_str()) == 0);
  CHECK(p.running());  // the rename happened while it was generating
  const CliExit e = p.wait(kDeadline);
  REQUIRE_FALSE(e.timed_out);
  CHECK(e.code == 0);
  CHECK(e.out == reference.out);
  CHECK(llmctl::test::read_file(path).size() == 1000);  // the path now names the new file
}

// quantize under Ctrl-C: 130 like every subcommand (it was 1), nothing left on disk. SmolLM2 to
// q4_k takes seconds, so the signal arrives while tensors are being written.
TEST_CASE("SIGINT during quantize: exit 130, no output and no temporary file", "[cli]") {
  const std::string model = require_test_file("models/SmolLM2-135M-Instruct.Q4_1.gguf");
  const std::string out = llmctl::test::temp_dir() + "/interrupted.gguf";
  CliProcess p({"quantize", model, out, "--type", "q4_k", "--allow-requantize", "-t", "1"});
  REQUIRE(p.wait_for_stderr("[3/", kDeadline));  // the third tensor has started
  const CliExit e = interrupt_and_wait(p);
  INFO("stderr: " << e.err);
  CHECK(e.code == 130);
  CHECK(has(e.err, "interrupted; the output file was not written"));
  CHECK_FALSE(std::filesystem::exists(out));
  for (const auto& entry : std::filesystem::directory_iterator(llmctl::test::temp_dir()))
    CHECK(entry.path().filename().string().rfind("interrupted.gguf", 0) != 0);
}

// Ctrl-C in the diagnostics (issue 20 point 4): they had no handler and died of SIGINT (a
// Python subprocess saw -2), and a file being written could leave its temporary behind. Now
// each stops at its next safe point (core/stop_point.h), writes nothing and exits 130. The
// signal is sent once the handler is installed (wait_for_handler), which the commands do
// before loading the model, so it arrives while they work (each runs for a second or more).
namespace {

// No file whose name starts with `prefix` in the test's temporary directory.
void check_no_file_named(const std::string& prefix) {
  for (const auto& entry : std::filesystem::directory_iterator(llmctl::test::temp_dir())) {
    INFO("left behind: " << entry.path());
    CHECK(entry.path().filename().string().rfind(prefix, 0) != 0);
  }
}

// Runs ARGS, interrupts it once it has its handler, and checks the clean stop: exit 130,
// "llmctl: interrupted", nothing on stdout, no file starting with `prefix` (not the output,
// not its temporary) and no summary line `summary`.
void check_interrupted_cleanly(const std::vector<std::string>& args, const std::string& prefix,
                               const std::string& summary) {
  CliProcess p(args);
  REQUIRE(p.wait_for_handler(SIGINT, kDeadline));
  const CliExit e = interrupt_and_wait(p);
  CHECK(e.code == 130);
  CHECK(has(e.err, "llmctl: interrupted"));
  CHECK_FALSE(has(e.err, summary));
  CHECK(e.out.empty());
  check_no_file_named(prefix);
}

}  // namespace

TEST_CASE("SIGINT during eval --save-imatrix: exit 130, no imatrix and no temporary file",
          "[cli]") {
  const std::string model = require_test_file("models/SmolLM2-135M-Instruct.Q4_1.gguf");
  const std::string out = llmctl::test::temp_dir() + "/sigint_eval.imatrix";
  check_interrupted_cleanly({"eval", "-m", model, "-c", "128", "-t", "1", "--save-imatrix", out},
                            "sigint_eval", "llmctl-eval:");
}

TEST_CASE("SIGINT during svd-embed --svg: exit 130, no chart and no temporary file", "[cli]") {
  const std::string model = require_test_file("models/SmolLM2-135M-Instruct.Q4_1.gguf");
  const std::string base = llmctl::test::temp_dir() + "/sigint_svd";
  check_interrupted_cleanly({"svd-embed", "-m", model, "-t", "1", "--svg", base}, "sigint_svd",
                            "llmctl: wrote");
}

TEST_CASE("SIGINT during rope-probe --svg: exit 130, no chart and no temporary file", "[cli]") {
  // SmolLM2's distance probe runs to its 8192-token training context: about a minute.
  const std::string model = require_test_file("models/SmolLM2-135M-Instruct.Q4_1.gguf");
  const std::string svg = llmctl::test::temp_dir() + "/sigint_rope.svg";
  check_interrupted_cleanly({"rope-probe", "-m", model, "-t", "1", "--svg", svg}, "sigint_rope",
                            "llmctl-rope-probe:");
}

TEST_CASE("SIGINT during bench: exit 130, the rows measured so far, no summary line", "[cli]") {
  const std::string model = require_test_file("models/stories260K.gguf");
  // A 30000-token decode row runs for many seconds; the probe is off so work starts at once.
  CliProcess p({"bench", "-m", model, "-t", "1", "-p", "16", "-n", "30000", "-r", "1",
                "--probe-mib", "0"});
  REQUIRE(p.wait_for_stderr("llmctl: bench ", kDeadline));  // the model is loaded
  const CliExit e = interrupt_and_wait(p);
  CHECK(e.code == 130);
  CHECK(has(e.err, "llmctl: interrupted; "));
  CHECK_FALSE(has(e.err, "llmctl-bench: rows="));
  CHECK_FALSE(has(e.out, "tg30000"));  // the interrupted row is not reported
}

// The subcommands with nothing to stop cleanly exit 130 at once (install_exit_on_interrupt):
// a process killed by SIGINT would read as -2 to a Python caller, not 130.
TEST_CASE("SIGINT during tokenize of a long file: exit 130, not death by the signal", "[cli]") {
  const std::string model = require_test_file("models/stories260K.gguf");
  const std::string text = llmctl::test::temp_dir() + "/sigint_tokenize.txt";
  {
    std::string big;
    for (int i = 0; i < 400000; ++i) big += "Once upon a time there was a little girl. ";
    llmctl::test::write_file(text, big);  // ~17 MB: seconds of tokenizing
  }
  CliProcess p({"tokenize", "-m", model, "--file", text, "--count"});
  REQUIRE(p.wait_for_handler(SIGINT, kDeadline));
  const CliExit e = interrupt_and_wait(p);
  CHECK(e.code == 130);
  std::filesystem::remove(text);
}
