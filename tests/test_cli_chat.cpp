// Chat through the model's own Jinja template: `tokenize --chat` shows the rendered prompt
// (checked against Python jinja2, tools/gen_chat_cli_fixture.py) and `run -i` chats with it.
// SmolLM2-135M-Instruct is a real instruct model whose GGUF carries a ChatML template with a
// default system prompt.
#include <algorithm>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "support/fixtures.h"
#include "support/run_cli.h"
#include "support/test_data.h"

using llmctl::test::require_test_file;
using llmctl::test::run_llmctl;

namespace {

const char* kSmolLM2 = "models/SmolLM2-135M-Instruct.Q4_1.gguf";

nlohmann::json fixture() {
  return nlohmann::json::parse(
      llmctl::test::read_file(llmctl::test::fixture_path("chat_cli_smollm2.json")));
}

std::string write_temp(const std::string& name, const std::string& bytes) {
  const std::string path = llmctl::test::temp_dir() + "/" + name;
  llmctl::test::write_file(path, bytes);
  return path;
}

std::vector<std::string> chat_summaries(const std::string& err) {
  std::vector<std::string> out;
  std::istringstream in(err);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("llmctl-chat:", 0) == 0) out.push_back(line);
  return out;
}

long long field(const std::string& line, const std::string& key) {
  std::smatch m;
  REQUIRE(std::regex_search(line, m, std::regex(key + "=(\\d+)")));
  return std::stoll(m[1].str());
}

}  // namespace

TEST_CASE("tokenize --chat renders SmolLM2's own template byte for byte as jinja2", "[cli][chat]") {
  const std::string m = require_test_file(kSmolLM2);
  const nlohmann::json cases = fixture().at("cases");  // a local: range-for would not keep a temporary
  int n = 0;
  for (const auto& c : cases) {
    const std::string file = write_temp("chat.json", c.at("messages").dump());
    std::vector<std::string> args = {"tokenize", "-m", m, "--chat", file, "--format", "text"};
    if (!c.at("add_generation_prompt").get<bool>()) args.push_back("--no-generation-prompt");
    const auto r = run_llmctl(args);
    INFO(c.at("name").get<std::string>() << " " << r.err);
    REQUIRE(r.code == 0);
    CHECK(r.out == c.at("expected").get<std::string>());
    ++n;
  }
  CHECK(n == 8);
}

TEST_CASE("message contents are never parsed for special tokens, the template's text is",
          "[cli][chat]") {
  const std::string m = require_test_file(kSmolLM2);
  const nlohmann::json cases = fixture().at("cases");
  for (const auto& c : cases) {
    if (c.at("name") != "looks_like_markup" || !c.at("add_generation_prompt").get<bool>()) continue;
    const std::string file = write_temp("markup.json", c.at("messages").dump());
    const auto r = run_llmctl({"tokenize", "-m", m, "--chat", file, "--format", "json"});
    REQUIRE(r.code == 0);
    const auto ids = nlohmann::json::parse(r.out).at("ids").get<std::vector<int32_t>>();
    // <|im_start|> (id 1) from the template: system, user and assistant headers. The user's
    // own "<|im_start|>" stays text.
    CHECK(std::count(ids.begin(), ids.end(), 1) == 3);
    // The same text as a plain prompt parses all four (tokenize, like run -p, parses them).
    const std::string expected = c.at("expected").get<std::string>();
    const auto plain = run_llmctl({"tokenize", "-m", m, "--format", "json", expected});
    REQUIRE(plain.code == 0);
    const auto pids = nlohmann::json::parse(plain.out).at("ids").get<std::vector<int32_t>>();
    CHECK(std::count(pids.begin(), pids.end(), 1) == 4);
    // <|im_end|> ends an assistant turn.
    const auto stops = nlohmann::json::parse(r.out).at("stop_ids").get<std::vector<int32_t>>();
    CHECK(std::find(stops.begin(), stops.end(), 2) != stops.end());
    return;
  }
  FAIL("the fixture has no looks_like_markup case");
}

TEST_CASE("a template that raises is exit 1 with the template's message", "[cli][chat]") {
  const std::string m = require_test_file(kSmolLM2);
  const std::string tpl = write_temp(
      "raise.jinja",
      "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
      "{% endif %}{{ messages[0]['content'] }}");
  const std::string file =
      write_temp("sys.json", R"([{"role": "system", "content": "x"}, {"role": "user", "content": "y"}])");
  const auto r = run_llmctl({"tokenize", "-m", m, "--chat", file, "--chat-template-file", tpl,
                             "--format", "text"});
  CHECK(r.code == 1);
  CHECK(r.err.find("System role not supported") != std::string::npos);
  const std::string ok = write_temp("user.json", R"([{"role": "user", "content": "y"}])");
  const auto r2 = run_llmctl({"tokenize", "-m", m, "--chat", ok, "--chat-template-file", tpl,
                              "--format", "text"});
  CHECK(r2.code == 0);
  CHECK(r2.out == "y");
}

TEST_CASE("run -i chats through the model's template and reuses the previous turns",
          "[cli][chat][slow]") {
  const std::string m = require_test_file(kSmolLM2);
  const auto r = run_llmctl({"run", "-m", m, "-i", "-n", "8", "--temp", "0", "-t", "2"},
                            "What is 2+2?\nAnd 3+3?\n");
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.err.find("Jinja template from the model file") != std::string::npos);
  const auto lines = chat_summaries(r.err);
  REQUIRE(lines.size() == 2);
  // The second turn re-renders the whole history; the cache reuses all but the tail blocks.
  const long long prompt2 = field(lines[1], "prompt_tokens");
  const long long reused2 = field(lines[1], "reused_tokens");
  CHECK(reused2 > 0);
  CHECK(prompt2 - reused2 < 40);  // the new turn and the last partial block
}

TEST_CASE("run -i drops the oldest turns when the history outgrows -c", "[cli][chat][slow]") {
  const std::string m = require_test_file(kSmolLM2);
  std::string turns;
  for (int i = 0; i < 5; ++i)
    turns += "Tell me something about the number " + std::to_string(i) + " please, briefly.\n";
  const auto r =
      run_llmctl({"run", "-m", m, "-i", "-n", "8", "--temp", "0", "-c", "128", "-t", "2"}, turns);
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(chat_summaries(r.err).size() == 5);
  CHECK(r.err.find("dropped the") != std::string::npos);
  CHECK(r.err.find("error") == std::string::npos);
}

TEST_CASE("run -i skips a turn too long for the context and keeps the history", "[cli][chat][slow]") {
  const std::string m = require_test_file(kSmolLM2);
  std::string long_line;
  for (int i = 0; i < 60; ++i) long_line += "word ";
  const auto r = run_llmctl({"run", "-m", m, "-i", "-n", "4", "--temp", "0", "-c", "64", "-t", "2"},
                            "Hi\n" + long_line + "\nOk\n");
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.err.find("does not fit in the context") != std::string::npos);
  const auto lines = chat_summaries(r.err);
  REQUIRE(lines.size() == 2);
  // The turn after the skipped one still holds the first turn and its answer.
  CHECK(field(lines[1], "prompt_tokens") > field(lines[0], "prompt_tokens") + 4);
}
