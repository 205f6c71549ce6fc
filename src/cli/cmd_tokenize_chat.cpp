// llmctl tokenize --chat FILE.json: a conversation rendered by the chat template, shown as the
// exact prompt text (--format text) or as the ids `run` would prefill (ids, pieces, json).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "cli/app.h"
#include "cli/chat_setup.h"
#include "cli/tokenize_options.h"
#include "core/error.h"
#include "core/text_io.h"
#include "io/gguf.h"
#include "io/json_error.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"

namespace llmctl::cli {

namespace {

using Json = nlohmann::ordered_json;

// FILE.json: a messages array, or an object with "messages" and other template variables.
void read_conversation(const std::string& path, Json& messages, Json& extra) {
  Json j;
  try {
    j = Json::parse(read_whole_file(path));
  } catch (const Json::exception& e) {
    throw FileError(path, fmt::format("is not valid JSON: {}", json_error_text(e.what())),
                    FileError::kNoOffset,
                    "give an OpenAI-style messages array, or {\"messages\": [...], \"tools\": ...}");
  }
  if (j.is_object()) {
    if (!j.contains("messages"))
      throw FileError(path, "the object has no \"messages\" array");
    messages = chat_messages_from_json(j["messages"], path);
    extra = j;
    extra.erase("messages");
  } else {
    messages = chat_messages_from_json(j, path);
    extra = Json::object();
  }
}

}  // namespace

int run_tokenize_chat(const Tokenizer& tok, const TokenizeOptions& opt) {
  if (opt.has_text || !opt.file.empty() || opt.decode || opt.norms)
    throw CLI::ValidationError("--chat", "--chat does not combine with TEXT, --file, --decode or --norms");
  Json messages, extra;
  read_conversation(opt.chat_file, messages, extra);
  std::string model_template;
  if (!opt.model.empty()) {
    const GgufFile f = GgufFile::open(opt.model);
    model_template = model_chat_template_text(opt.model, &f);
  }
  const ChatFormatter chat = choose_chat_formatter(
      ChatTemplateChoice{opt.chat_template, opt.chat_template_file}, model_template, tok);
  const bool add_generation_prompt = !opt.no_generation_prompt;
  const std::string format = opt.json ? "json" : opt.format;
  if (format == "text") {
    fmt::print("{}", chat.render(messages, extra, add_generation_prompt));
    return kExitOk;
  }
  const std::vector<int32_t> ids = chat.encode(messages, extra, add_generation_prompt);
  if (opt.count) {
    fmt::print("{}\n", ids.size());
  } else {
    print_ids(tok, ids, format,
              {{"template", chat.description()},
               {"text", chat.render(messages, extra, add_generation_prompt)},
               {"stop_ids", chat.stop_ids()}});
  }
  return kExitOk;
}

}  // namespace llmctl::cli
