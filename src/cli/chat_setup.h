#pragma once
// Which chat template a subcommand uses (run -i, run --batch "messages", tokenize --chat):
//   --chat-template-file FILE   a Jinja file
//   --chat-template NAME        a built-in template (llama2, llama3, chatml, zephyr)
//   otherwise                   the model's own Jinja template: GGUF tokenizer.chat_template,
//                               or a Hugging Face directory's chat_template.jinja /
//                               tokenizer_config.json "chat_template"
// A model template that does not parse falls back to the built-in template it resembles,
// with a warning; a model without a template is an error that names both options.

#include <string>

#include "tokenizer/chat.h"

namespace llmctl {
class GgufFile;
class Tokenizer;
}  // namespace llmctl

namespace llmctl::cli {

struct ChatTemplateChoice {
  std::string name;  // --chat-template
  std::string file;  // --chat-template-file
};

// The model's own template text; "" when it has none. model_path is a GGUF file (gguf given)
// or a Hugging Face directory.
std::string model_chat_template_text(const std::string& model_path, const GgufFile* gguf);

ChatFormatter choose_chat_formatter(const ChatTemplateChoice& choice,
                                    const std::string& model_template, const Tokenizer& tok);

}  // namespace llmctl::cli
