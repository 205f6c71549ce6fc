// --cuda-graphs on|off (run and bench): accepted values, refused ones (usage error, exit 2), and
// no effect on the CPU (the same ids and logits hash with it on and off).
#include <catch2/catch.hpp>
#include <string>

#include "support/run_cli.h"
#include "support/test_data.h"

using llmctl::test::require_test_file;
using llmctl::test::run_llmctl;

namespace {

// The value of `key` in the last stderr line ("key=value" pairs).
std::string summary_value(const std::string& err, const std::string& key) {
  const size_t end = err.find_last_not_of('\n');
  const size_t start = err.rfind('\n', end);
  const size_t first = start == std::string::npos ? 0 : start + 1;
  const std::string last = err.substr(first, end + 1 - first);
  const size_t at = last.find(key + "=");
  if (at == std::string::npos) return "";
  const size_t from = at + key.size() + 1;
  return last.substr(from, last.find(' ', from) - from);
}

}  // namespace

TEST_CASE("run --cuda-graphs on|off: no effect on the CPU, other values refused", "[cli]") {
  const std::string model = require_test_file("models/stories260K.gguf");
  std::string hash, out;
  for (const char* v : {"off", "on"}) {
    const auto r = run_llmctl({"run", "-m", model, "-p", "Once upon a time", "-n", "16", "--seed",
                               "3", "--device", "cpu", "--cuda-graphs", v});
    CAPTURE(v, r.err);
    REQUIRE(r.code == 0);
    if (hash.empty()) {
      hash = summary_value(r.err, "logits_hash");
      out = r.out;
    }
    CHECK(summary_value(r.err, "logits_hash") == hash);
    CHECK(r.out == out);
  }
  CHECK(hash.size() == 16);
  const auto bad = run_llmctl({"run", "-m", model, "-p", "x", "--cuda-graphs", "maybe"});
  CHECK(bad.code == 2);
  CHECK(bad.err.find("--cuda-graphs") != std::string::npos);
}

TEST_CASE("bench --cuda-graphs: on runs on the CPU, other values refused", "[cli]") {
  const std::string model = require_test_file("models/stories260K.gguf");
  const auto ok = run_llmctl({"bench", "-m", model, "--device", "cpu", "-p", "0", "-n", "4", "-r",
                              "1", "-t", "1", "--probe-mib", "0", "--cuda-graphs", "on", "--json"});
  CAPTURE(ok.err);
  CHECK(ok.code == 0);
  CHECK(ok.out.find("\"cuda_graphs\": true") != std::string::npos);
  const auto bad = run_llmctl({"bench", "-m", model, "--cuda-graphs", "yes"});
  CHECK(bad.code == 2);
  CHECK(bad.err.find("--cuda-graphs") != std::string::npos);
}
