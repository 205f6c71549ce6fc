// Chat templates against the models' own Jinja templates rendered by jinja2
// (tests/fixtures/chat_templates.json, written by tools/gen_chat_fixture.py), and detection
// of the GGUF tokenizer.chat_template sources in that fixture.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "support/fixtures.h"
#include "support/test_data.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

using llmctl::chat_template_from_name;
using llmctl::ChatMessage;
using llmctl::ChatRole;
using llmctl::ChatTemplate;
using llmctl::detect_chat_template;
using llmctl::render_chat;

namespace {

nlohmann::json load_fixture() {
  return nlohmann::json::parse(
      llmctl::test::read_file(llmctl::test::fixture_path("chat_templates.json")));
}

std::vector<ChatMessage> to_messages(const nlohmann::json& arr) {
  std::vector<ChatMessage> out;
  for (const auto& m : arr) {
    const auto role = llmctl::chat_role_from_name(m.at("role").get<std::string>());
    REQUIRE(role.has_value());
    out.push_back({*role, m.at("content").get<std::string>()});
  }
  return out;
}

std::string escape(const std::string& s) { return nlohmann::json(s).dump(); }

}  // namespace

TEST_CASE("render_chat reproduces the Jinja templates", "[cpu][tokenizer][golden]") {
  const nlohmann::json fx = load_fixture();
  size_t rendered = 0, raised = 0;
  for (const auto& c : fx.at("cases")) {
    const auto t = chat_template_from_name(c.at("family").get<std::string>());
    REQUIRE(t.has_value());
    const auto messages = to_messages(c.at("messages"));
    const bool gen = c.at("add_generation_prompt").get<bool>();
    const std::string bos = c.at("bos"), eos = c.at("eos");
    INFO(c.at("template").get<std::string>()
         << " messages=" << c.at("messages").dump() << " add_generation_prompt=" << gen);
    if (c.contains("error")) {
      CHECK_THROWS_AS(render_chat(*t, messages, gen, bos, eos), llmctl::Error);
      ++raised;
    } else {
      const std::string got = render_chat(*t, messages, gen, bos, eos);
      const std::string want = c.at("expected");
      INFO("got  " << escape(got) << "\nwant " << escape(want));
      CHECK(got == want);
      ++rendered;
    }
  }
  CHECK(rendered >= 90);  // every family, both add_generation_prompt values
  CHECK(raised >= 4);     // llama2's alternation rule
}

TEST_CASE("detect_chat_template knows the four families and nothing else", "[cpu][tokenizer]") {
  const nlohmann::json fx = load_fixture();
  for (const auto& tmpl : fx.at("templates")) {
    INFO(tmpl.at("name").get<std::string>());
    const auto got = detect_chat_template(tmpl.at("source").get<std::string>());
    if (tmpl.at("family").is_null()) {
      CHECK_FALSE(got.has_value());
    } else {
      REQUIRE(got.has_value());
      CHECK(llmctl::chat_template_name(*got) == tmpl.at("family").get<std::string>());
    }
  }
  CHECK_FALSE(detect_chat_template("").has_value());
  CHECK_FALSE(detect_chat_template("{{ messages[0]['content'] }}").has_value());
  CHECK_FALSE(detect_chat_template("<|user|> only").has_value());
  CHECK(std::string(llmctl::kUnrecognizedChatTemplate).find("--chat-template") !=
        std::string::npos);
}

TEST_CASE("chat template names round-trip, unknown names are rejected", "[cpu][tokenizer]") {
  for (const char* name : {"llama2", "llama3", "chatml", "zephyr"}) {
    const auto t = chat_template_from_name(name);
    REQUIRE(t.has_value());
    CHECK(std::string(llmctl::chat_template_name(*t)) == name);
  }
  CHECK(chat_template_from_name("ChatML") == ChatTemplate::ChatML);
  CHECK_FALSE(chat_template_from_name("llama").has_value());
  CHECK_FALSE(chat_template_from_name("").has_value());
  CHECK_FALSE(llmctl::chat_role_from_name("tool").has_value());
  CHECK_FALSE(llmctl::chat_role_from_name("User").has_value());
}

TEST_CASE("python_strip removes what Python's str.strip() removes", "[cpu][tokenizer]") {
  using llmctl::python_strip;
  CHECK(python_strip("") == "");
  CHECK(python_strip(" \t\n\r\v\f") == "");
  CHECK(python_strip("  a b  ") == "a b");
  CHECK(python_strip("\xE3\x80\x80x\xC2\xA0") == "x");                  // U+3000, U+00A0
  CHECK(python_strip("\xE2\x80\xA8x\xE2\x80\x8B") == "x\xE2\x80\x8B");  // U+2028 yes, U+200B no
  CHECK(python_strip("\x1Fx\x1C") == "x");                              // ASCII separators count
  CHECK(python_strip("\xFF x \xFF") == "\xFF x \xFF");                  // invalid bytes stay
  CHECK(python_strip(" \xE3\x80") == "\xE3\x80");                       // truncated character stays
}

TEST_CASE("turn-end tokens: text per template, ids from the vocabulary", "[cpu][tokenizer]") {
  CHECK(llmctl::chat_turn_end_text(ChatTemplate::Llama3, "</s>") == "<|eot_id|>");
  CHECK(llmctl::chat_turn_end_text(ChatTemplate::ChatML, "</s>") == "<|im_end|>");
  CHECK(llmctl::chat_turn_end_text(ChatTemplate::Llama2, "</s>") == "</s>");
  CHECK(llmctl::chat_turn_end_text(ChatTemplate::Zephyr, "<|endoftext|>") == "<|endoftext|>");

  const auto tok = llmctl::Tokenizer::from_file(
      llmctl::test::require_test_file("vocab/ggml-vocab-llama-spm.gguf"));
  CHECK(llmctl::chat_stop_ids(ChatTemplate::Llama2, tok) == std::vector<int32_t>{2});
  // No <|eot_id|> in this vocabulary: EOS alone.
  CHECK(llmctl::chat_stop_ids(ChatTemplate::Llama3, tok) == std::vector<int32_t>{2});
}

TEST_CASE("a rendered llama2 prompt tokenizes with its <s> and </s> as tokens",
          "[cpu][tokenizer]") {
  const auto tok = llmctl::Tokenizer::from_file(
      llmctl::test::require_test_file("vocab/ggml-vocab-llama-spm.gguf"));
  const std::vector<ChatMessage> chat = {
      {ChatRole::User, "Hi"}, {ChatRole::Assistant, "Hello"}, {ChatRole::User, "Bye"}};
  const std::string text = render_chat(ChatTemplate::Llama2, chat, true, "<s>", "</s>");
  REQUIRE(text == "<s>[INST] Hi [/INST] Hello </s><s>[INST] Bye [/INST]");
  const std::vector<int32_t> ids = tok.encode(text, false, true);
  std::vector<int32_t> want = {1};
  for (const char* run : {"[INST] Hi [/INST] Hello "}) {
    const auto e = tok.encode(run, false);
    want.insert(want.end(), e.begin(), e.end());
  }
  want.push_back(2);
  want.push_back(1);
  const auto e = tok.encode("[INST] Bye [/INST]", false);
  want.insert(want.end(), e.begin(), e.end());
  CHECK(ids == want);
}
