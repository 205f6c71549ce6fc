// The command line as users and scripts see it: help, version, exit codes.
#include <catch2/catch.hpp>

#include "support/run_cli.h"

using llmctl::test::run_llmctl;

TEST_CASE("help lists every subcommand", "[cli]") {
  const auto r = run_llmctl({"--help"});
  REQUIRE(r.code == 0);
  for (const char* sub : {"run", "quantize", "tokenize", "kvplan", "rope-probe", "svd-embed", "inspect"})
    CHECK(r.out.find(sub) != std::string::npos);
}

TEST_CASE("version names commit, build type, cpu features and gpu state", "[cli]") {
  const auto r = run_llmctl({"--version"});
  REQUIRE(r.code == 0);
  CHECK(r.out.find("llmctl ") == 0);
  CHECK(r.out.find("git ") != std::string::npos);
  CHECK(r.out.find("build") != std::string::npos);
  CHECK(r.out.find("cpu features detected:") != std::string::npos);
  CHECK(r.out.find("cpu matmul isa: ") != std::string::npos);
  CHECK(r.out.find("cuda:") != std::string::npos);
  // Either GPUs are listed or the reason for none is given.
  CHECK((r.out.find("gpu 0:") != std::string::npos || r.out.find("gpus: none (") != std::string::npos));
}

TEST_CASE("an unknown option is a usage error with exit code 2", "[cli]") {
  const auto r = run_llmctl({"--no-such-option"});
  CHECK(r.code == 2);
  CHECK(!r.err.empty());
}

TEST_CASE("an unknown subcommand is named, with a did-you-mean", "[cli]") {
  const auto generate = run_llmctl({"generate", "-p", "hi"});
  CHECK(generate.code == 2);
  CHECK(generate.err.find("llmctl: error: unknown subcommand 'generate'; did you mean 'llmctl run'?") == 0);
  const auto typo = run_llmctl({"tokenzie", "hi"});
  CHECK(typo.code == 2);
  CHECK(typo.err.find("did you mean 'llmctl tokenize'?") != std::string::npos);
  const auto far = run_llmctl({"xyzzy"});
  CHECK(far.code == 2);
  CHECK(far.err.find("unknown subcommand 'xyzzy'\n") != std::string::npos);  // nothing close
  CHECK(far.err.find("the subcommands are inspect, tokenize, run") != std::string::npos);
}

TEST_CASE("llmctl help SUBCOMMAND is the same as --help", "[cli]") {
  const auto run = run_llmctl({"help", "run"});
  CHECK(run.code == 0);
  CHECK(run.out == run_llmctl({"run", "--help"}).out);
  const auto top = run_llmctl({"help"});
  CHECK(top.code == 0);
  CHECK(top.out == run_llmctl({"--help"}).out);
}
