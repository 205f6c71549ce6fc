// Token-inflation report: prompt readers, code point counts, and token counts checked
// against the reference tokenizations of llama.cpp's vocabulary tests.
#include <catch2/catch.hpp>

#include "core/error.h"
#include "support/test_data.h"
#include "support/vocab_cases.h"
#include "tokenizer/inflation.h"
#include "tokenizer/tokenizer.h"

using namespace llmctl;

TEST_CASE("prompts from lines skip empty lines and strip CR", "[cpu]") {
  const auto p = prompts_from_lines("first\r\n\nsecond line\nthird");
  REQUIRE(p.size() == 3);
  CHECK(p[0].text == "first");
  CHECK(p[1].text == "second line");
  CHECK(p[1].label == "line 3");
  CHECK(p[2].text == "third");
  CHECK(prompts_from_lines("").empty());
  CHECK(prompts_from_lines("\n\n").empty());
}

TEST_CASE("prompts from jsonl accept strings and objects", "[cpu]") {
  const auto p = prompts_from_jsonl(
      "\"plain\\nstring\"\n{\"prompt\": \"p\", \"id\": \"a\"}\n\n{\"text\": \"t\", \"id\": 7}\n", "x.jsonl");
  REQUIRE(p.size() == 3);
  CHECK(p[0].text == "plain\nstring");
  CHECK(p[1].label == "a");
  CHECK(p[2].text == "t");
  CHECK(p[2].label == "7");
}

TEST_CASE("prompts from jsonl: a repeated key or a deep id is that line's error", "[cpu]") {
  // As run --batch reads its lines (io/json_line.h): the last "prompt" was kept silently, and
  // printing a deeply nested "id" as the label overflowed the stack (exit 139).
  CHECK_THROWS_WITH(prompts_from_jsonl("\"ok\"\n{\"prompt\": \"a\", \"prompt\": \"b\"}\n", "p.jsonl"),
                    Catch::StartsWith("p.jsonl:2: key \"prompt\" appears more than once"));
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  CHECK_THROWS_WITH(prompts_from_jsonl("\n\n{\"prompt\": \"a\", \"id\": " + deep + "}\n", "p.jsonl"),
                    Catch::StartsWith("p.jsonl:3: nested deeper than"));
}

TEST_CASE("prompts from jsonl name the line of a bad record", "[cpu]") {
  CHECK_THROWS_WITH(prompts_from_jsonl("\"ok\"\n{bad json\n", "p.jsonl"),
                    Catch::StartsWith("p.jsonl:2: invalid JSON: parse error at column 2:"));
  // The library's internal code ("[json.exception.parse_error.101]") is not shown.
  try {
    prompts_from_jsonl("{bad json\n", "p.jsonl");
    FAIL("no error");
  } catch (const llmctl::Error& e) {
    CHECK(std::string(e.what()).find("json.exception") == std::string::npos);
  }
  CHECK_THROWS_WITH(prompts_from_jsonl("[1,2]\n", "p.jsonl"),
                    Catch::StartsWith("p.jsonl:1: expected a JSON string or object"));
  CHECK_THROWS_WITH(prompts_from_jsonl("{\"x\": 1}\n", "p.jsonl"),
                    Catch::Contains("no \"prompt\" or \"text\""));
  CHECK_THROWS_WITH(prompts_from_jsonl("{\"prompt\": 3}\n", "p.jsonl"),
                    Catch::Contains("must be a string"));
}

TEST_CASE("code points count multi-byte characters once and bad bytes one each", "[cpu]") {
  CHECK(count_code_points("") == 0);
  CHECK(count_code_points("abc") == 3);
  CHECK(count_code_points("\xc3\x84pfel") == 5);                // Äpfel
  CHECK(count_code_points("\xf0\x9f\x98\x81") == 1);            // one emoji, 4 bytes
  CHECK(count_code_points("\xe2\x82") == 2);                    // truncated sequence
  CHECK(count_code_points("\xff\xfe") == 2);                    // invalid bytes
  CHECK(count_code_points("\xc3\x28") == 2);                    // bad continuation
}

TEST_CASE("inflation counts equal the reference tokenizations", "[cpu][golden]") {
  const std::string spm = test::require_test_file("vocab/ggml-vocab-llama-spm.gguf");
  const std::string gpt2 = test::require_test_file("vocab/ggml-vocab-gpt-2.gguf");
  const auto spm_cases = test::load_vocab_cases("vocab/ggml-vocab-llama-spm.gguf");
  const auto gpt2_cases = test::load_vocab_cases("vocab/ggml-vocab-gpt-2.gguf");
  REQUIRE(spm_cases.size() == gpt2_cases.size());
  const Tokenizer a = Tokenizer::from_file(spm);
  const Tokenizer b = Tokenizer::from_file(gpt2);
  std::vector<Prompt> prompts;
  for (const auto& c : spm_cases) prompts.push_back({"", c.text});
  const InflationReport rep = measure_inflation({&a, &b}, prompts, int64_t{10});
  REQUIRE(rep.rows.size() == spm_cases.size());
  int64_t total_a = 0, total_b = 0, over = 0;
  for (size_t i = 0; i < spm_cases.size(); ++i) {
    INFO("case " << i);
    const auto na = static_cast<int64_t>(spm_cases[i].ids.size());
    const auto nb = static_cast<int64_t>(gpt2_cases[i].ids.size());
    CHECK(rep.rows[i].tokens == std::vector<int64_t>{na, nb});
    CHECK(rep.rows[i].bytes == static_cast<int64_t>(spm_cases[i].text.size()));
    CHECK(rep.rows[i].over_budget == (na > 10 || nb > 10));
    if (na > 0) {
      REQUIRE(rep.rows[i].inflation_pct(1).has_value());
      CHECK(*rep.rows[i].inflation_pct(1) == Approx(100.0 * static_cast<double>(nb - na) / static_cast<double>(na)));
    } else {
      CHECK_FALSE(rep.rows[i].inflation_pct(1).has_value());
    }
    total_a += na;
    total_b += nb;
    over += (na > 10 || nb > 10) ? 1 : 0;
  }
  CHECK(rep.total.tokens == std::vector<int64_t>{total_a, total_b});
  CHECK(rep.n_over_budget == over);
}
