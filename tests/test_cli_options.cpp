// One vocabulary of options (issue 20, points 7-9): the engine's options mean and check the same
// in every subcommand, llama.cpp's and vLLM's spellings are accepted, help and errors read as
// llmctl's own.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/run_cli.h"
#include "support/test_data.h"

using llmctl::test::require_test_file;
using llmctl::test::run_llmctl;

namespace {

std::string stories() { return require_test_file("models/stories260K.gguf"); }

std::string summary_value(const std::string& err, const std::string& key) {
  const size_t at = err.rfind(" " + key + "=");
  if (at == std::string::npos) return "";
  const size_t b = at + key.size() + 2;
  return err.substr(b, err.find_first_of(" \n", b) - b);
}

// The subcommands that run a model, with arguments that make them quick.
std::vector<std::vector<std::string>> engine_commands(const std::string& m) {
  return {{"run", "-m", m, "-p", "hi", "-n", "1"},
          {"bench", "-m", m, "-p", "4", "-n", "2", "-r", "1", "--probe-mib", "0"},
          {"eval", "-m", m, "-c", "16"},
          {"rope-probe", "-m", m, "--probes", "shift", "--offsets", "8"},
          {"svd-embed", "-m", m, "--no-low-rank"}};
}

const std::vector<std::string> kSubcommands = {"inspect", "tokenize", "run",  "kvplan",   "quantize",
                                               "bench",   "eval",     "rope-probe", "svd-embed"};

}  // namespace

TEST_CASE("threads: -t 0 is every core and -t -1 a usage error in every engine subcommand", "[cli]") {
  const std::string m = stories();
  for (std::vector<std::string> args : engine_commands(m)) {
    INFO(args[0]);
    std::vector<std::string> zero = args;
    zero.insert(zero.end(), {"-t", "0", "--device", "cpu"});
    CHECK(run_llmctl(zero).code == 0);
    args.insert(args.end(), {"-t", "-1"});
    const auto r = run_llmctl(args);
    CHECK(r.code == 2);
    CHECK(r.err.find("llmctl: error: -t/--threads wants an integer from 0 to 1024, got -1\n") == 0);
  }
  const std::string out = llmctl::test::temp_dir() + "/q.gguf";
  CHECK(run_llmctl({"quantize", m, out, "--type", "q8_0", "--dry-run", "-t", "0"}).code == 0);
}

TEST_CASE("device: auto by default, a bad name is a usage error everywhere", "[cli]") {
  const std::string m = stories();
  for (std::vector<std::string> args : engine_commands(m)) {
    INFO(args[0]);
    CHECK(run_llmctl({args[0], "--help"}).out.find("--device DEVICE=auto") != std::string::npos);
    args.insert(args.end(), {"--device", "gpu0"});
    const auto r = run_llmctl(args);
    CHECK(r.code == 2);
    CHECK(r.err.find("llmctl: error: --device wants auto, cpu, cuda or cuda:N, got 'gpu0'") == 0);
  }
}

TEST_CASE("run -i --ignore-eos answers to -n tokens", "[cli]") {
  const std::string m = require_test_file("models/SmolLM2-135M-Instruct.Q4_1.gguf");
  // Greedy, this answer ends with the end of turn after 24 tokens.
  const auto r = run_llmctl({"run", "-m", m, "-i", "--temp", "0", "-n", "40", "--ignore-eos"},
                            "Say hi.\n");
  REQUIRE(r.code == 0);
  CHECK(r.err.find("gen_tokens=40 ") != std::string::npos);
  CHECK(r.err.find("finish=n_predict") != std::string::npos);
}

TEST_CASE("inspect and quantize take -m like every subcommand", "[cli]") {
  const std::string m = stories();
  const auto positional = run_llmctl({"inspect", m, "--json"});
  REQUIRE(positional.code == 0);
  CHECK(run_llmctl({"inspect", "-m", m, "--json"}).out == positional.out);
  const std::string out = llmctl::test::temp_dir() + "/m.gguf";
  const auto q = run_llmctl({"quantize", "-m", m, out, "--type", "q8_0", "--dry-run", "--json"});
  CHECK(q.code == 0);
  CHECK(q.out == run_llmctl({"quantize", m, out, "--type", "q8_0", "--dry-run", "--json"}).out);
  CHECK(run_llmctl({"quantize", "-m", m, m, out, "--type", "q8_0"}).code == 2);
}

TEST_CASE("llama.cpp's spellings: -s, -np, -sys, -ctk/-ctv, -f for eval, -c", "[cli]") {
  const std::string m = stories();
  const std::vector<std::string> base = {"run", "-m", m, "-p", "Once", "-n", "4"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = base;
    a.insert(a.end(), extra.begin(), extra.end());
    return run_llmctl(a);
  };
  const auto seeded = with({"-s", "42"});
  REQUIRE(seeded.code == 0);
  CHECK(summary_value(seeded.err, "seed") == "42");
  CHECK(seeded.out == with({"--seed", "42"}).out);
  const auto random = with({"-s", "-1"});
  CHECK(random.code == 0);
  CHECK(summary_value(random.err, "seed") != "-1");
  CHECK(with({"-sys", "Be brief."}).code == 0);
  CHECK(with({"-ctk", "f32", "-ctv", "f32"}).err.find(", f32, blocks of") != std::string::npos);
  // K and V of their own types (llama.cpp's -ctk/-ctv); --kv-type sets both, so a -ctk that
  // names another type contradicts it.
  CHECK(with({"-ctk", "f16", "-ctv", "f32"}).err.find(", K f16 + V f32, blocks of") != std::string::npos);
  const auto differ = with({"--kv-type", "f16", "-ctk", "f32"});
  CHECK(differ.code == 2);
  CHECK(differ.err.find("llmctl: error: --kv-type f16 and -ctk f32 differ: --kv-type sets both K "
                        "and V (give -ctk and -ctv alone for different types)") == 0);

  const auto batch = run_llmctl({"run", "-m", m, "--batch", "-", "-np", "2", "-n", "2"},
                                "{\"prompt\": \"a\"}\n{\"prompt\": \"b\"}\n");
  CHECK(batch.code == 0);
  CHECK(batch.err.find("parallel=2") != std::string::npos);

  const std::string text = llmctl::test::temp_dir() + "/text.txt";
  llmctl::test::write_file(text, "Once upon a time there was a little girl named Lily.\n");
  const auto f = run_llmctl({"eval", "-m", m, "-f", text, "-c", "8", "--json"});
  REQUIRE(f.code == 0);
  CHECK(f.out == run_llmctl({"eval", "-m", m, "--text", text, "--ctx", "8", "--json"}).out);
}

TEST_CASE("kvplan: --parallel (-np) for concurrent sequences, vLLM's option names", "[cli]") {
  const std::vector<std::string> ours = {"kvplan", "-m", "llama-3.1-8b", "--engine", "vllm", "--ctx", "16384",
                                         "--gpu-util", "0.95", "--tp", "2", "--kv-type", "fp8",
                                         "--max-batched-tokens", "4096", "--parallel", "8", "--json"};
  const auto a = run_llmctl(ours);
  REQUIRE(a.code == 0);
  const auto vllm = run_llmctl({"kvplan", "-m", "llama-3.1-8b", "--engine", "vllm", "--max-model-len", "16384",
                                "--gpu-memory-utilization", "0.95", "--tensor-parallel-size", "2",
                                "--kv-cache-dtype", "fp8", "--max-num-batched-tokens", "4096", "-np", "8",
                                "--json"});
  CHECK(vllm.code == 0);
  CHECK(vllm.out == a.out);
  CHECK(nlohmann::json::parse(a.out).dump().find("\"batch\":8") != std::string::npos);
  // --batch still works, with a note: in run it is a JSONL file.
  std::vector<std::string> old = ours;
  old[old.size() - 3] = "--batch";
  const auto b = run_llmctl(old);
  CHECK(b.code == 0);
  CHECK(b.out == a.out);
  CHECK(b.err.find("llmctl: note: kvplan --batch is deprecated; it is now --parallel 8") == 0);
  CHECK(nlohmann::json::parse(a.out).at("parallel") == 8);
  // -ctk / -ctv: K and V in their own types, by run's rule (--kv-type sets both).
  const auto ctk = run_llmctl({"kvplan", "-m", "llama-3.1-8b", "-ctk", "q8_0", "-ctv", "q4_0", "--json"});
  REQUIRE(ctk.code == 0);
  const auto j = nlohmann::json::parse(ctk.out);
  CHECK(j.at("kv_type") == "K q8_0, V q4_0");
  CHECK(j.at("kv_type_k") == "q8_0");
  CHECK(j.at("kv_type_v") == "q4_0");
  // 32 layers x 1024 K values in q8_0 (34 B per 32) and 1024 V values in q4_0 (18 B per 32)
  CHECK(j.at("kv_bytes_per_token") == 32 * (32 * 34 + 32 * 18));
  const auto v_only = run_llmctl({"kvplan", "-m", "llama-3.1-8b", "-ctv", "q4_0", "--json"});
  REQUIRE(v_only.code == 0);
  CHECK(nlohmann::json::parse(v_only.out).at("kv_bytes_per_token") == 32 * (1024 * 2 + 32 * 18));
  const auto clash = run_llmctl({"kvplan", "-m", "llama-3.1-8b", "--kv-type", "f16", "-ctk", "q8_0"});
  CHECK(clash.code == 2);
  CHECK(clash.err.find("--kv-type f16 and -ctk q8_0 differ") != std::string::npos);
}

TEST_CASE("help shows no parser residue in any subcommand", "[cli]") {
  for (const std::string& sub : kSubcommands) {
    INFO(sub);
    const auto r = run_llmctl({sub, "--help"});
    REQUIRE(r.code == 0);
    for (const char* residue : {"INT:", "FLOAT:", "TEXT:", " in [", "Excludes:", "Needs:", "REQUIRED",
                                "POSITIVE", "NONNEGATIVE"})
      CHECK(r.out.find(residue) == std::string::npos);
    // Scripts read the exit codes from the help: every subcommand lists them, Ctrl-C's too.
    CHECK(r.out.find("Exit codes: 0 ok") != std::string::npos);
    CHECK(r.out.find("130 stopped by Ctrl-C") != std::string::npos);
  }
}

TEST_CASE("usage errors are prefixed llmctl: error: and say what was wanted", "[cli]") {
  const std::string m = stories();
  struct Case {
    std::vector<std::string> args;
    std::string err;  // the first line
  };
  const std::vector<Case> cases = {
      {{"run", "-m", m, "-n", "abc"}, "llmctl: error: -n/--n-predict wants an integer >= -1, got 'abc'"},
      {{"run", "-m", m, "--temp", "abc"}, "llmctl: error: --temp wants a number, got 'abc'"},
      {{"run", "-m", m, "--ctx-sise", "64"},
       "llmctl: error: unknown option '--ctx-sise'; did you mean '--ctx-size'?"},
      {{"run", "-m"}, "llmctl: error: -m/--model needs a value"},
      {{"svd-embed", "-m", m, "--json", "--csv"}, "llmctl: error: --json and --csv cannot be combined"},
      {{"bench"}, "llmctl: error: -m/--model is required"},
      {{"kvplan", "-m", "llama-3.1-8b", "--gpu-util", "1.5"},
       "llmctl: error: --gpu-util wants a number in (0, 1], got 1.5"},
      {{"run", "-m", m, "-i", "--batch", "-"}, "llmctl: error: -i and --batch cannot be combined"},
  };
  for (const Case& c : cases) {
    INFO(c.args[0] << " " << c.args.back());
    const auto r = run_llmctl(c.args);
    CHECK(r.code == 2);
    CHECK(r.err.substr(0, r.err.find('\n')) == c.err);
    CHECK(r.err.find("Run with --help") == std::string::npos);
  }
}

TEST_CASE("a repeated option takes its last value", "[cli]") {
  const auto r = run_llmctl({"run", "-m", stories(), "-p", "Once", "-n", "3", "-n", "5", "--ignore-eos"});
  REQUIRE(r.code == 0);
  CHECK(summary_value(r.err, "gen_tokens") == "5");
  // A list option keeps every value.
  const auto stops = run_llmctl({"run", "-m", stories(), "-p", "Once", "-n", "2", "--stop", "x", "--stop", "y"});
  CHECK(stops.code == 0);
}
