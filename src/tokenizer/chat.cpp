// Chat prompts: render with the template, then tokenize with special-token parsing kept out of
// the message contents (chat.h).
#include "tokenizer/chat.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "core/error.h"
#include "tokenizer/jinja/jinja.h"
#include "tokenizer/tokenizer.h"

namespace llmctl {

namespace {

using Json = nlohmann::ordered_json;

// The text a message contributes: its content string, or the texts of its content parts.
std::vector<std::string> content_texts(const Json& message) {
  std::vector<std::string> out;
  const auto it = message.find("content");
  if (it == message.end()) return out;
  if (it->is_string()) {
    out.push_back(it->get<std::string>());
  } else if (it->is_array()) {
    for (const Json& part : *it)
      if (part.is_object() && part.contains("text") && part["text"].is_string())
        out.push_back(part["text"].get<std::string>());
  }
  return out;
}

// Byte ranges of `text` that hold message contents, found in message order (templates write
// the messages in order). A content the template transformed (trimmed, say) is looked for as
// Python's strip() leaves it; one that cannot be found is not protected, which only matters
// when it contains special-token text.
std::vector<std::pair<size_t, size_t>> content_spans(const std::string& text, const Json& messages) {
  std::vector<std::pair<size_t, size_t>> spans;
  size_t cursor = 0;
  for (const Json& m : messages) {
    for (const std::string& content : content_texts(m)) {
      for (const std::string_view needle : {std::string_view(content), python_strip(content)}) {
        if (needle.empty()) break;
        const size_t at = text.find(needle, cursor);
        if (at == std::string::npos) continue;
        spans.emplace_back(at, at + needle.size());
        cursor = at + needle.size();
        break;
      }
    }
  }
  return spans;
}

// Special-token partition of `text` (Tokenizer::split_special), with every special match that
// overlaps a protected span turned back into text, then encoded as encode(text, false, true)
// encodes its fragments: each text run on its own.
std::vector<int32_t> encode_protected(const Tokenizer& tok, const std::string& text,
                                      const std::vector<std::pair<size_t, size_t>>& spans) {
  std::vector<int32_t> out;
  std::string run;
  auto flush = [&] {
    if (run.empty()) return;
    const std::vector<int32_t> ids = tok.encode(run, false);
    out.insert(out.end(), ids.begin(), ids.end());
    run.clear();
  };
  for (const TextFragment& f : tok.split_special(text)) {
    const size_t begin = static_cast<size_t>(f.text.data() - text.data());
    const size_t end = begin + f.text.size();
    const bool protected_text = std::any_of(spans.begin(), spans.end(), [&](const auto& s) {
      return begin < s.second && s.first < end;
    });
    if (f.id >= 0 && !protected_text) {
      flush();
      out.push_back(f.id);
    } else {
      run.append(f.text);
    }
  }
  flush();
  return out;
}

std::vector<ChatMessage> builtin_messages(const Json& messages) {
  std::vector<ChatMessage> out;
  for (const Json& m : messages) {
    const auto role_it = m.find("role");
    const std::string role =
        role_it != m.end() && role_it->is_string() ? role_it->get<std::string>() : std::string();
    const std::optional<ChatRole> r = chat_role_from_name(role);
    if (!r)
      throw Error(fmt::format("message role '{}' is not supported by the built-in templates", role),
                  "use system, user or assistant, or give a Jinja template (--chat-template-file)");
    std::string content;
    for (const std::string& t : content_texts(m)) content += t;
    out.push_back(ChatMessage{*r, std::move(content)});
  }
  return out;
}

}  // namespace

ChatFormatter::ChatFormatter(const Tokenizer& tok, std::string description)
    : tok_(&tok), description_(std::move(description)) {
  if (tok.bos_id() >= 0) bos_text_ = tok.piece(tok.bos_id());
  if (tok.eos_id() >= 0) eos_text_ = tok.piece(tok.eos_id());
}

ChatFormatter::ChatFormatter(ChatFormatter&&) noexcept = default;
ChatFormatter& ChatFormatter::operator=(ChatFormatter&&) noexcept = default;
ChatFormatter::~ChatFormatter() = default;

ChatFormatter ChatFormatter::from_jinja(const std::string& source, const std::string& origin,
                                        const Tokenizer& tok) {
  ChatFormatter f(tok, fmt::format("Jinja template from {}", origin));
  f.jinja_ = std::make_unique<jinja::Template>(source);
  f.find_stop_ids();
  return f;
}

ChatFormatter ChatFormatter::from_builtin(ChatTemplate t, const Tokenizer& tok) {
  ChatFormatter f(tok, fmt::format("built-in template {}", chat_template_name(t)));
  f.builtin_ = t;
  f.stop_ids_ = chat_stop_ids(t, tok);
  return f;
}

std::string ChatFormatter::render(const Json& messages, const Json& extra,
                                  bool add_generation_prompt) const {
  if (builtin_)
    return render_chat(*builtin_, builtin_messages(messages), add_generation_prompt, bos_text_,
                       eos_text_);
  Json context = extra.is_object() ? extra : Json::object();
  context["messages"] = messages;
  context["bos_token"] = bos_text_;
  context["eos_token"] = eos_text_;
  context["add_generation_prompt"] = add_generation_prompt;
  return jinja_->render(context);
}

std::vector<int32_t> ChatFormatter::encode(const Json& messages, const Json& extra,
                                           bool add_generation_prompt) const {
  const std::string text = render(messages, extra, add_generation_prompt);
  std::vector<int32_t> ids = encode_protected(*tok_, text, content_spans(text, messages));
  const int32_t bos = tok_->bos_id();
  if (tok_->add_bos_default() && bos >= 0 && (ids.empty() || ids.front() != bos))
    ids.insert(ids.begin(), bos);
  return ids;
}

// Renders a user/assistant exchange and reads the special token the template writes right
// after the assistant's text: that token ends a turn. Templates that refuse the probe (they
// raise for it) leave EOS alone.
void ChatFormatter::find_stop_ids() {
  const int32_t eos = tok_->eos_id();
  if (eos >= 0) stop_ids_.push_back(eos);
  const std::string marker = "llmctl-turn-probe";
  const Json probe = Json::array({{{"role", "user"}, {"content", "hi"}},
                                  {{"role", "assistant"}, {"content", marker}}});
  std::string text;
  try {
    text = render(probe, Json(), false);
  } catch (const Error&) {
    return;
  }
  const size_t at = text.rfind(marker);
  if (at == std::string::npos) return;
  for (const TextFragment& f : tok_->split_special(std::string_view(text).substr(at + marker.size()))) {
    if (f.id >= 0) {
      if (std::find(stop_ids_.begin(), stop_ids_.end(), f.id) == stop_ids_.end())
        stop_ids_.push_back(f.id);
      break;
    }
    if (python_strip(f.text).size() > 0) break;  // text before any token: no end token
  }
}

Json chat_messages_from_json(const Json& j, const std::string& where) {
  if (!j.is_array())
    throw Error(fmt::format("{}: expected an array of messages ({{\"role\": ..., \"content\": ...}})",
                            where));
  for (size_t i = 0; i < j.size(); ++i) {
    const Json& m = j[i];
    if (!m.is_object())
      throw Error(fmt::format("{}: message {} is not an object", where, i));
    if (!m.contains("role") || !m["role"].is_string())
      throw Error(fmt::format("{}: message {} has no \"role\" string", where, i));
    if (m.contains("content") && !m["content"].is_string() && !m["content"].is_array() &&
        !m["content"].is_null())
      throw Error(fmt::format("{}: message {}: \"content\" must be a string or an array of parts",
                              where, i));
  }
  return j;
}

}  // namespace llmctl
