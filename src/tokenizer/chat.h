#pragma once
// A conversation rendered for a model and tokenized. The template is the model's own Jinja
// chat template (GGUF tokenizer.chat_template, a Hugging Face directory's chat_template.jinja
// or tokenizer_config.json) rendered with Hugging Face's semantics (jinja/jinja.h); the four
// named built-in templates (chat_template.h) are the fallback for files without one.
//
// Special tokens: the rendered prompt is tokenized with special-token parsing, except inside
// the message contents. A user who types "<|im_start|>" gets those characters as text; only
// what the template itself writes (its role markers, bos_token ...) becomes special tokens.
//
// BOS: Hugging Face never adds one to a chat prompt (the template writes it when the model
// wants it); llama.cpp adds BOS when the vocabulary asks for it (tokenizer.ggml.add_bos_token)
// and the rendered prompt does not already start with it. llmctl does what llama.cpp does, so
// prompts and ids compare with it.

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tokenizer/chat_template.h"

namespace llmctl {

class Tokenizer;
namespace jinja {
class Template;
}

class ChatFormatter {
 public:
  // A Jinja template; `origin` says where it came from, for messages ("the model file",
  // "tpl.jinja"). Throws jinja::TemplateError when the source does not parse.
  static ChatFormatter from_jinja(const std::string& source, const std::string& origin,
                                  const Tokenizer& tok);
  static ChatFormatter from_builtin(ChatTemplate t, const Tokenizer& tok);

  ChatFormatter(ChatFormatter&&) noexcept;
  ChatFormatter& operator=(ChatFormatter&&) noexcept;
  ~ChatFormatter();

  // messages: an OpenAI-style array of {"role", "content", ...}. extra: more template
  // variables ("tools", "date_string" ...), an object or null. The text exactly as the
  // template renders it. Throws Error when the template raises (its own message) or when a
  // built-in template cannot express the conversation.
  std::string render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& extra,
                     bool add_generation_prompt) const;
  // The ids of render(...): special tokens parsed outside the message contents only, BOS as
  // llama.cpp adds it (see above).
  std::vector<int32_t> encode(const nlohmann::ordered_json& messages,
                              const nlohmann::ordered_json& extra,
                              bool add_generation_prompt) const;
  // The ids that end an assistant turn: EOS, and the special token the template writes right
  // after an assistant message ("<|im_end|>", "<|eot_id|>", "<end_of_turn>" ...).
  const std::vector<int32_t>& stop_ids() const { return stop_ids_; }
  // "the model's Jinja template" / "built-in chatml" ...: for the banner line.
  const std::string& description() const { return description_; }

 private:
  ChatFormatter(const Tokenizer& tok, std::string description);
  void find_stop_ids();

  const Tokenizer* tok_;
  std::string description_;
  std::unique_ptr<jinja::Template> jinja_;  // set for Jinja templates
  std::optional<ChatTemplate> builtin_;     // set for built-in ones
  std::string bos_text_;
  std::string eos_text_;
  std::vector<int32_t> stop_ids_;
};

// Messages from OpenAI-style JSON: an array of {"role", "content"}. `where` names the input
// in errors ("chat.json", "line 3"). Throws Error for anything else (a role or content that is
// not a string, a message that is not an object). Content may also be an array of parts
// ({"type": "text", "text": ...}), as OpenAI's API allows; it is kept as given for the template.
nlohmann::ordered_json chat_messages_from_json(const nlohmann::ordered_json& j,
                                               const std::string& where);

}  // namespace llmctl
