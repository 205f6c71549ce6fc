// Special-token text in prompts (-p, -f, --batch, tokenize): parsed into its token by default,
// as llama.cpp's tokenizer does (parse_special), and kept as text with --no-parse-special.
// Expected ids: llama.cpp's reference tokenization of stories260K ("Once upon a time" ->
// 1 403 407 261 378, golden/), where 1 is <s>.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/run_cli.h"
#include "support/test_data.h"

using llmctl::test::require_test_file;
using llmctl::test::run_llmctl;

namespace {

std::vector<int32_t> prompt_ids_of(const llmctl::test::CliResult& r) {
  REQUIRE(r.code == 0);
  return nlohmann::json::parse(r.out).at("prompt_ids").get<std::vector<int32_t>>();
}

}  // namespace

TEST_CASE("run -p parses the BOS text into its token and no-parse-special keeps it text", "[cli]") {
  const std::string m = require_test_file("models/stories260K.gguf");
  // The text after "<s>" is encoded on its own, so it gets the dummy-prefix space, as
  // llama.cpp does: the same ids as BOS + "Once upon a time".
  const std::vector<int32_t> parsed = prompt_ids_of(run_llmctl(
      {"run", "-m", m, "-p", "<s>Once upon a time", "-n", "1", "--temp", "0", "--no-bos", "--json"}));
  CHECK(parsed == std::vector<int32_t>{1, 403, 407, 261, 378});
  const std::vector<int32_t> plain = prompt_ids_of(
      run_llmctl({"run", "-m", m, "-p", "<s>Once upon a time", "-n", "1", "--temp", "0", "--no-bos",
                  "--no-parse-special", "--json"}));
  CHECK(std::find(plain.begin(), plain.end(), 1) == plain.end());
  CHECK(plain.size() > parsed.size());
}

TEST_CASE("run --batch prompts parse special tokens as -p does", "[cli]") {
  const std::string m = require_test_file("models/stories260K.gguf");
  const std::string line = "{\"prompt\": \"<s>Once upon a time\"}\n";
  auto first_record = [](const llmctl::test::CliResult& r) {
    REQUIRE(r.code == 0);
    return nlohmann::json::parse(r.out.substr(0, r.out.find('\n')));
  };
  const auto parsed = first_record(
      run_llmctl({"run", "-m", m, "--batch", "-", "-n", "1", "--temp", "0", "--no-bos"}, line));
  CHECK(parsed.at("prompt_ids").get<std::vector<int32_t>>() ==
        std::vector<int32_t>{1, 403, 407, 261, 378});
  const auto plain = first_record(run_llmctl(
      {"run", "-m", m, "--batch", "-", "-n", "1", "--temp", "0", "--no-bos", "--no-parse-special"},
      line));
  const auto ids = plain.at("prompt_ids").get<std::vector<int32_t>>();
  CHECK(std::find(ids.begin(), ids.end(), 1) == ids.end());
}
