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
  CHECK(r.out.find("cuda:") != std::string::npos);
  // Either GPUs are listed or the reason for none is given.
  CHECK((r.out.find("gpu 0:") != std::string::npos || r.out.find("gpus: none (") != std::string::npos));
}

TEST_CASE("an unknown option is a usage error with exit code 2", "[cli]") {
  const auto r = run_llmctl({"--no-such-option"});
  CHECK(r.code == 2);
  CHECK(!r.err.empty());
}
