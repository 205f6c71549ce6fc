// The --batch JSONL protocol: every malformed-line category gets an error record naming its
// line, the good lines around it survive, records are one parseable line each, and --resume
// finds the answered indices (ignoring a line cut off mid-write).
#include <catch2/catch.hpp>
#include <sstream>

#include "cli/batch_io.h"

using llmctl::ChatRole;
using llmctl::cli::BatchLine;
using llmctl::cli::read_batch_requests;
using json = nlohmann::json;

namespace {

std::vector<BatchLine> read(const std::string& text) {
  std::istringstream in(text);
  return read_batch_requests(in, "in.jsonl");
}

// The input: one good line, then `bad`, then one good line.
void check_bad_line(const std::string& bad, const std::string& expect_in_error) {
  INFO("bad line: " << bad);
  const auto lines = read("{\"prompt\": \"first\"}\n" + bad + "\n{\"prompt\": \"last\"}\n");
  REQUIRE(lines.size() == 3);
  CHECK(lines[0].request.has_value());
  CHECK(lines[2].request.has_value());
  CHECK(lines[2].index == 2);
  CHECK(lines[2].request->prompt == "last");
  CHECK(lines[1].index == 1);
  CHECK_FALSE(lines[1].request.has_value());
  CHECK(lines[1].error.rfind("line 2: ", 0) == 0);
  CHECK_THAT(lines[1].error, Catch::Matchers::Contains(expect_in_error));
  // Its error record is one line of JSON with the index.
  const std::string rec =
      llmctl::cli::batch_error_json(lines[1].index, lines[1].id, lines[1].error);
  CHECK(rec.find('\n') == std::string::npos);
  const json j = json::parse(rec);
  CHECK(j.at("index") == 1);
  CHECK(j.at("error") == json(lines[1].error));  // (round-trips: errors are valid UTF-8 here)
}

}  // namespace

TEST_CASE("batch: a good request with every field", "[cpu][cli]") {
  const auto lines = read(
      R"({"id": {"k": [1, 2]}, "prompt": "Once", "n_predict": 8, "temperature": 0.5,)"
      R"( "top_k": 40, "top_p": 0.9, "min_p": 0, "seed": 18446744073709551615, "stop": ["\n", "END"]})"
      "\n");
  REQUIRE(lines.size() == 1);
  REQUIRE(lines[0].request.has_value());
  const auto& r = *lines[0].request;
  CHECK(lines[0].index == 0);
  CHECK(*lines[0].id == json::parse(R"({"k": [1, 2]})"));
  CHECK(r.prompt == "Once");
  CHECK(r.n_predict == 8);
  CHECK(r.temperature == 0.5f);
  CHECK(r.top_k == 40);
  CHECK(r.top_p == 0.9f);
  CHECK(r.min_p == 0.0f);
  CHECK(r.seed == UINT64_MAX);
  CHECK(r.stop == std::vector<std::string>{"\n", "END"});
  CHECK(r.messages.empty());
}

TEST_CASE("batch: chat messages", "[cpu][cli]") {
  const auto lines = read(
      R"({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]})");
  REQUIRE(lines.size() == 1);
  REQUIRE(lines[0].request.has_value());
  const auto& m = lines[0].request->messages;
  REQUIRE(m.size() == 2);
  CHECK(m[0].role == ChatRole::System);
  CHECK(m[0].content == "Be brief.");
  CHECK(m[1].role == ChatRole::User);
  CHECK_FALSE(lines[0].request->prompt.has_value());
  CHECK_FALSE(lines[0].id.has_value());
}

TEST_CASE("batch: every malformed-line category is an error record, neighbours survive",
          "[cpu][cli]") {
  check_bad_line("{\"prompt\": \"unterminated", "not valid JSON");
  check_bad_line("not json at all", "not valid JSON");
  check_bad_line("{\"prompt\": \"x\"} trailing", "not valid JSON");
  check_bad_line("[\"prompt\"]", "expected a JSON object");
  check_bad_line("\"just a string\"", "expected a JSON object");
  check_bad_line("42", "expected a JSON object");
  check_bad_line("{}", "\"prompt\" is missing");
  check_bad_line("{\"id\": 7}", "\"prompt\" is missing");
  check_bad_line("{\"prompt\": 5}", "\"prompt\" must be a string");
  check_bad_line("{\"prompt\": null}", "\"prompt\" must be a string");
  check_bad_line("{\"prompt\": \"x\", \"n_predic\": 3}", "unknown key \"n_predic\"");
  check_bad_line("{\"prompt\": \"x\", \"n_predict\": \"3\"}", "\"n_predict\" must be an integer");
  check_bad_line("{\"prompt\": \"x\", \"n_predict\": 2.5}", "\"n_predict\" must be an integer");
  check_bad_line("{\"prompt\": \"x\", \"n_predict\": -1}", "out of range");
  check_bad_line("{\"prompt\": \"x\", \"n_predict\": 9999999999999}", "out of range");
  check_bad_line("{\"prompt\": \"x\", \"n_predict\": 99999999999999999999}", "must be an integer");
  check_bad_line("{\"prompt\": \"x\", \"temperature\": -0.1}", "temperature");
  check_bad_line("{\"prompt\": \"x\", \"temperature\": true}", "must be a number");
  check_bad_line("{\"prompt\": \"x\", \"top_k\": -1}", "out of range");
  check_bad_line("{\"prompt\": \"x\", \"top_p\": 0}", "(0, 1]");
  check_bad_line("{\"prompt\": \"x\", \"top_p\": 1.5}", "(0, 1]");
  check_bad_line("{\"prompt\": \"x\", \"min_p\": 2}", "[0, 1]");
  check_bad_line("{\"prompt\": \"x\", \"seed\": -5}", "out of range");
  check_bad_line("{\"prompt\": \"x\", \"stop\": \"END\"}", "\"stop\" must be an array");
  check_bad_line("{\"prompt\": \"x\", \"stop\": [\"a\", 1]}", "stop[1] must be a string");
  check_bad_line("{\"prompt\": \"x\", \"stop\": [\"\"]}", "stop[0] is empty");
  check_bad_line("{\"prompt\": \"x\", \"prompt\": \"y\"}", "\"prompt\" appears more than once");
  check_bad_line("{\"prompt\": \"x\", \"messages\": [{\"role\": \"user\", \"content\": \"y\"}]}",
                 "not both");
  check_bad_line("{\"messages\": []}", "\"messages\" is empty");
  check_bad_line("{\"messages\": {\"role\": \"user\"}}", "\"messages\" must be an array");
  check_bad_line("{\"messages\": [\"hi\"]}", "messages[0] must be an object");
  check_bad_line("{\"messages\": [{\"role\": \"tool\", \"content\": \"y\"}]}",
                 "messages[0].role = \"tool\" is not system, user or assistant");
  check_bad_line("{\"messages\": [{\"role\": \"user\"}]}", "messages[0]: \"content\" is missing");
  check_bad_line("{\"messages\": [{\"content\": \"x\"}]}", "messages[0]: \"role\" is missing");
  check_bad_line("{\"messages\": [{\"role\": \"user\", \"content\": \"x\", \"name\": \"n\"}]}",
                 "messages[0]: unknown key \"name\"");
  check_bad_line("{\"prompt\": \"\xFF\xFE bad utf-8\"}", "not valid JSON");
  check_bad_line(
      "{\"id\": " + std::string(100, '[') + std::string(100, ']') + ", \"prompt\": \"x\"}",
      "nested deeper than");
}

TEST_CASE("batch: the id of a bad line is kept when it can be read", "[cpu][cli]") {
  const auto lines = read("{\"id\": \"req-7\", \"prompt\": 3}\n");
  REQUIRE(lines.size() == 1);
  REQUIRE(lines[0].id.has_value());
  CHECK(*lines[0].id == "req-7");
  const json j = json::parse(llmctl::cli::batch_error_json(0, lines[0].id, lines[0].error));
  CHECK(j.at("id") == "req-7");
}

TEST_CASE("batch: blank lines are skipped but counted, CRLF and a BOM are accepted", "[cpu][cli]") {
  const auto lines = read("\xEF\xBB\xBF{\"prompt\": \"a\"}\r\n\n   \r\n\t\n{\"prompt\": \"b\"}");
  REQUIRE(lines.size() == 2);
  CHECK(lines[0].index == 0);
  CHECK(lines[0].request->prompt == "a");
  CHECK(lines[1].index == 4);  // line 5: the last line needs no newline
  CHECK(lines[1].request->prompt == "b");
  CHECK(read("").empty());
  CHECK(read("\n\n").empty());
}

TEST_CASE("batch: a line over the limit is an error, the next line is read", "[cpu][cli][slow]") {
  std::string big = "{\"prompt\": \"";
  big.append(llmctl::cli::kMaxBatchLineBytes, 'x');
  big += "\"}\n{\"prompt\": \"after\"}\n";
  const auto lines = read(big);
  REQUIRE(lines.size() == 2);
  CHECK_THAT(lines[0].error, Catch::Matchers::Contains("line 1: longer than"));
  REQUIRE(lines[1].request.has_value());
  CHECK(lines[1].request->prompt == "after");
}

TEST_CASE("batch: result records carry run --json's fields and the index", "[cpu][cli]") {
  llmctl::cli::BatchResult r;
  r.index = 3;
  r.id = json("abc");
  r.prompt_ids = {1, 2};
  r.generated_ids = {5};
  r.text = "caf\xC3\xA9 \xFF";  // invalid byte -> U+FFFD, never a broken record
  r.finish_reason = "n_predict";
  r.seed = 42;
  r.timings.ttft_ms = 1.5;
  r.logits_hash = "00000000deadbeef";
  const std::string line = llmctl::cli::batch_result_json(r);
  CHECK(line.find('\n') == std::string::npos);
  const json j = json::parse(line);
  CHECK(j.at("index") == 3);
  CHECK(j.at("id") == "abc");
  CHECK(j.at("prompt_ids") == json::array({1, 2}));
  CHECK(j.at("generated_ids") == json::array({5}));
  CHECK(j.at("text") == "caf\xC3\xA9 \xEF\xBF\xBD");
  CHECK(j.at("finish_reason") == "n_predict");
  CHECK(j.at("seed") == 42);
  CHECK(j.at("logits_hash") == "00000000deadbeef");
  for (const char* k :
       {"prefill_ms", "ttft_ms", "decode_ms", "prefill_tok_s", "decode_tok_s", "p50_ms", "p95_ms"})
    CHECK(j.at("timings").contains(k));
  CHECK(j.at("timings").at("ttft_ms") == 1.5);
  r.id.reset();
  CHECK_FALSE(json::parse(llmctl::cli::batch_result_json(r)).contains("id"));
}

TEST_CASE("batch --resume: answered indices, a cut-off last line ignored", "[cpu][cli]") {
  llmctl::cli::BatchResult r;
  r.index = 0;
  const std::string rec0 = llmctl::cli::batch_result_json(r);
  const std::string err2 = llmctl::cli::batch_error_json(2, std::nullopt, "line 3: bad");
  r.index = 5;
  const std::string rec5 = llmctl::cli::batch_result_json(r);
  SECTION("complete output") {
    std::istringstream in(rec0 + "\n" + err2 + "\n" + rec5 + "\n");
    const auto prev = llmctl::cli::scan_previous_output(in);
    CHECK(prev.answered == std::set<int64_t>{0, 2, 5});
    CHECK_FALSE(prev.ends_with_partial_line);
  }
  SECTION("the run was killed while writing the last record") {
    std::istringstream in(rec0 + "\n" + err2 + "\n" + rec5.substr(0, rec5.size() / 2));
    const auto prev = llmctl::cli::scan_previous_output(in);
    CHECK(prev.answered == std::set<int64_t>{0, 2});
    CHECK(prev.ends_with_partial_line);
  }
  SECTION("a complete-looking last record without its newline is not trusted") {
    std::istringstream in(rec0 + "\n" + rec5);
    CHECK(llmctl::cli::answered_indices(in) == std::set<int64_t>{0});
  }
  SECTION("junk and records without an integer index are ignored") {
    std::istringstream in("garbage\n{\"index\": \"1\"}\n[1]\n\n" + rec5 + "\n");
    CHECK(llmctl::cli::answered_indices(in) == std::set<int64_t>{5});
  }
  SECTION("resume = the good input lines minus the answered ones") {
    const auto lines = read("{\"prompt\":\"a\"}\n{\"prompt\":1}\n\n{\"prompt\":\"c\"}\n");
    std::istringstream prev(rec0 + "\n");
    const auto done = llmctl::cli::answered_indices(prev);
    std::vector<int64_t> todo;
    for (const auto& l : lines)
      if (done.count(l.index) == 0) todo.push_back(l.index);
    CHECK(todo == std::vector<int64_t>{1, 3});
  }
}
