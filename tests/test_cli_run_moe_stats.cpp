// `llmctl run --moe-stats` as a user calls it: the option in the help, and on a model without
// experts (stories260K) an error before anything is generated, in every mode of run.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "support/run_cli.h"
#include "support/test_data.h"

using llmctl::test::require_test_file;
using llmctl::test::run_llmctl;

TEST_CASE("run --moe-stats: in the help, with what each column means", "[cli]") {
  const auto help = run_llmctl({"run", "--help"});
  REQUIRE(help.code == 0);
  for (const char* s : {"--moe-stats", "Router statistics of a mixture-of-experts model",
                        "top-k mass", "max_load", "never\n    chosen", "\"moe_stats\""})
    CHECK(help.out.find(s) != std::string::npos);
}

TEST_CASE("run --moe-stats on a dense model: an error naming it, in every mode, nothing generated",
          "[cli]") {
  const std::string model = require_test_file("models/stories260K.gguf");
  const std::vector<std::vector<std::string>> modes = {
      {"run", "-m", model, "-p", "Once", "-n", "4", "--moe-stats"},
      {"run", "-m", model, "-p", "Once", "-n", "4", "--moe-stats", "--attn-stats", "--json"},
      {"run", "-m", model, "--batch", "-", "-n", "4", "--moe-stats"},
      {"run", "-m", model, "-i", "--chat-template", "chatml", "-n", "4", "--moe-stats"}};
  for (const auto& args : modes) {
    CAPTURE(args);
    const auto r = run_llmctl(args, "{\"prompt\": \"x\"}\n");
    CHECK(r.code == 1);
    CHECK(r.out.empty());
    CHECK(r.err.find("llmctl: error: --moe-stats: " + model + " (llama) has no experts") !=
          std::string::npos);
    CHECK(r.err.find("mixture-of-experts models") != std::string::npos);  // the hint
    CHECK(r.err.find("llmctl-run:") == std::string::npos);                // no summary line
  }
  // The same command without the flag runs.
  CHECK(run_llmctl({"run", "-m", model, "-p", "Once", "-n", "4"}).code == 0);
}
