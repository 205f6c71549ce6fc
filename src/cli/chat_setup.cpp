// Choosing the chat template (chat_setup.h).
#include "cli/chat_setup.h"

#include <fmt/format.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/text_io.h"
#include "io/gguf.h"
#include "io/json_error.h"
#include "tokenizer/jinja/jinja.h"
#include "tokenizer/tokenizer.h"

namespace llmctl::cli {

namespace {

namespace fs = std::filesystem;

// tokenizer_config.json's chat_template: a string, or a list of {"name", "template"} of which
// "default" is the one apply_chat_template uses without a name.
std::string template_from_tokenizer_config(const std::string& path) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_whole_file(path));
  } catch (const nlohmann::json::exception& e) {
    throw FileError(path, fmt::format("is not valid JSON: {}", json_error_text(e.what())));
  }
  if (!j.is_object()) return "";
  const auto t = j.find("chat_template");
  if (t == j.end()) return "";
  if (t->is_string()) return t->get<std::string>();
  if (!t->is_array()) return "";
  for (const nlohmann::json& e : *t) {
    if (!e.is_object()) continue;
    const auto name = e.find("name");
    const auto text = e.find("template");
    if (name != e.end() && *name == "default" && text != e.end() && text->is_string())
      return text->get<std::string>();
  }
  return "";
}

}  // namespace

std::string model_chat_template_text(const std::string& model_path, const GgufFile* gguf) {
  if (gguf != nullptr) return gguf->get_string_or("tokenizer.chat_template", "");
  std::error_code ec;
  if (!fs::is_directory(model_path, ec)) return "";
  const fs::path dir(model_path);
  if (fs::exists(dir / "chat_template.jinja", ec))
    return read_whole_file((dir / "chat_template.jinja").string());
  if (fs::exists(dir / "tokenizer_config.json", ec))
    return template_from_tokenizer_config((dir / "tokenizer_config.json").string());
  return "";
}

ChatFormatter choose_chat_formatter(const ChatTemplateChoice& choice,
                                    const std::string& model_template, const Tokenizer& tok) {
  if (!choice.file.empty()) return ChatFormatter::from_jinja(read_whole_file(choice.file), choice.file, tok);
  if (!choice.name.empty()) {
    const std::optional<ChatTemplate> t = chat_template_from_name(choice.name);
    if (!t)
      throw Error(fmt::format("--chat-template '{}' is not a built-in template", choice.name),
                  "use llama2, llama3, chatml or zephyr, or --chat-template-file FILE.jinja");
    return ChatFormatter::from_builtin(*t, tok);
  }
  if (model_template.empty())
    throw Error("the model has no chat template (tokenizer.chat_template)",
                "pass --chat-template-file FILE.jinja or --chat-template llama2|llama3|chatml|zephyr");
  try {
    return ChatFormatter::from_jinja(model_template, "the model file", tok);
  } catch (const jinja::TemplateError& e) {
    const std::optional<ChatTemplate> t = detect_chat_template(model_template);
    if (!t)
      throw Error(fmt::format("the model's chat template cannot be rendered: {}", e.what()),
                  "pass --chat-template-file FILE.jinja or --chat-template NAME");
    fmt::print(stderr, "llmctl: warning: the model's chat template cannot be rendered ({}); using "
               "the built-in {} template it resembles\n", e.what(), chat_template_name(*t));
    return ChatFormatter::from_builtin(*t, tok);
  }
}

}  // namespace llmctl::cli
