// Chat templates (see chat_template.h). Each render_* function is the model's Jinja template
// translated line by line; the Jinja source is quoted above each one.
#include "tokenizer/chat_template.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace llmctl {

namespace {

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

bool contains(std::string_view hay, std::string_view needle) {
  return hay.find(needle) != std::string_view::npos;
}

// Python's str.isspace() for one code point.
bool is_python_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

// Zephyr closes every turn with an end token right after the content; Falcon 3 closes the
// user turn with a newline and Phi-3 with <|end|>. Looks at the text from each "<|user|>" to
// the next Jinja tag or "<|assistant|>".
bool user_turn_has_end_token(std::string_view jinja) {
  for (size_t pos = jinja.find("<|user|>"); pos != std::string_view::npos;
       pos = jinja.find("<|user|>", pos + 1)) {
    std::string_view turn = jinja.substr(pos);
    const size_t end = std::min(turn.find("{%"), turn.find("<|assistant|>"));
    turn = turn.substr(0, end);
    if (contains(turn, "eos_token") || contains(turn, "</s>") || contains(turn, "<|endoftext|>"))
      return true;
  }
  return false;
}

// ---------------------------------------------------------------------------
// Renderers
// ---------------------------------------------------------------------------

// {% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}
// {% set system_message = messages[0]['content'] %}{% else %}... system_message = false
// {% for message in loop_messages %}
//   {% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception(...) }}
//   {% if loop.index0 == 0 and system_message != false %}
//     {% set content = '<<SYS>>\n' + system_message + '\n<</SYS>>\n\n' + message['content'] %}
//   {% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}
//   {% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}
std::string render_llama2(const std::vector<ChatMessage>& messages, const std::string& bos,
                          const std::string& eos) {
  // The template reads messages[0] first, which fails in Jinja for an empty conversation.
  if (messages.empty()) throw Error("llama2 chat: the conversation has no messages");
  size_t first = 0;
  const std::string* system = nullptr;
  if (!messages.empty() && messages[0].role == ChatRole::System) {
    system = &messages[0].content;
    first = 1;
  }
  std::string out;
  for (size_t i = first; i < messages.size(); ++i) {
    const size_t index0 = i - first;
    const ChatMessage& m = messages[i];
    if ((m.role == ChatRole::User) != (index0 % 2 == 0))
      throw Error(fmt::format(
          "llama2 chat: message {} is a {} message; roles must alternate user/assistant/user/"
          "assistant/... after an optional first system message",
          i, chat_role_name(m.role)));
    std::string content = m.content;
    if (index0 == 0 && system != nullptr)
      content = "<<SYS>>\n" + *system + "\n<</SYS>>\n\n" + m.content;
    if (m.role == ChatRole::User) {
      out += bos;
      out += "[INST] ";
      out += python_strip(content);
      out += " [/INST]";
    } else if (m.role == ChatRole::Assistant) {
      out += " ";
      out += python_strip(content);
      out += " ";
      out += eos;
    }
    // A system message at an odd position passes the alternation check and prints nothing.
  }
  return out;
}

// {% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] +
// '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}
// {% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}
// {% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
std::string render_llama3(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                          const std::string& bos) {
  std::string out;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (i == 0) out += bos;
    out += "<|start_header_id|>";
    out += chat_role_name(messages[i].role);
    out += "<|end_header_id|>\n\n";
    out += python_strip(messages[i].content);
    out += "<|eot_id|>";
  }
  if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

// {% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] +
// '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}
std::string render_chatml(const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  std::string out;
  for (const ChatMessage& m : messages) {
    out += "<|im_start|>";
    out += chat_role_name(m.role);
    out += "\n";
    out += m.content;
    out += "<|im_end|>\n";
  }
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

// {% for message in messages %}
// {% if message['role'] == 'user' %}
// {{ '<|user|>\n' + message['content'] + eos_token }}      (system, assistant alike)
// {% endif %}
// {% if loop.last and add_generation_prompt %}
// {{ '<|assistant|>' }}
// {% endif %}
// {% endfor %}
// trim_blocks drops the newline after each {% %} tag; the one after each {{ }} stays.
std::string render_zephyr(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                          const std::string& eos) {
  std::string out;
  for (const ChatMessage& m : messages) {
    out += "<|";
    out += chat_role_name(m.role);
    out += "|>\n";
    out += m.content;
    out += eos;
    out += "\n";
  }
  if (add_generation_prompt && !messages.empty()) out += "<|assistant|>\n";
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------
// Names and detection
// ---------------------------------------------------------------------------

std::optional<ChatTemplate> chat_template_from_name(std::string_view name) {
  for (const ChatTemplate t :
       {ChatTemplate::Llama2, ChatTemplate::Llama3, ChatTemplate::ChatML, ChatTemplate::Zephyr})
    if (iequals(name, chat_template_name(t))) return t;
  return std::nullopt;
}

const char* chat_template_name(ChatTemplate t) {
  switch (t) {
    case ChatTemplate::Llama2:
      return "llama2";
    case ChatTemplate::Llama3:
      return "llama3";
    case ChatTemplate::ChatML:
      return "chatml";
    case ChatTemplate::Zephyr:
      return "zephyr";
  }
  return "?";
}

std::optional<ChatRole> chat_role_from_name(std::string_view name) {
  if (name == "system") return ChatRole::System;
  if (name == "user") return ChatRole::User;
  if (name == "assistant") return ChatRole::Assistant;
  return std::nullopt;
}

const char* chat_role_name(ChatRole r) {
  switch (r) {
    case ChatRole::System:
      return "system";
    case ChatRole::User:
      return "user";
    case ChatRole::Assistant:
      return "assistant";
  }
  return "?";
}

std::optional<ChatTemplate> detect_chat_template(std::string_view jinja) {
  // Order matters only for templates that mention several families; the most specific first.
  if (contains(jinja, "<|start_header_id|>")) return ChatTemplate::Llama3;
  if (contains(jinja, "<|im_start|>")) return ChatTemplate::ChatML;
  if (contains(jinja, "[INST]")) return ChatTemplate::Llama2;
  if (contains(jinja, "<|user|>") && contains(jinja, "<|assistant|>") &&
      !contains(jinja, "<|end|>") && user_turn_has_end_token(jinja))
    return ChatTemplate::Zephyr;
  return std::nullopt;
}

// ---------------------------------------------------------------------------
// Rendering
// ---------------------------------------------------------------------------

std::string render_chat(ChatTemplate t, const std::vector<ChatMessage>& messages,
                        bool add_generation_prompt, const std::string& bos_text,
                        const std::string& eos_text) {
  switch (t) {
    case ChatTemplate::Llama2:
      return render_llama2(messages, bos_text, eos_text);
    case ChatTemplate::Llama3:
      return render_llama3(messages, add_generation_prompt, bos_text);
    case ChatTemplate::ChatML:
      return render_chatml(messages, add_generation_prompt);
    case ChatTemplate::Zephyr:
      return render_zephyr(messages, add_generation_prompt, eos_text);
  }
  throw Error("render_chat: unknown chat template");
}

std::string chat_turn_end_text(ChatTemplate t, const std::string& eos_text) {
  switch (t) {
    case ChatTemplate::Llama3:
      return "<|eot_id|>";
    case ChatTemplate::ChatML:
      return "<|im_end|>";
    case ChatTemplate::Llama2:
    case ChatTemplate::Zephyr:
      return eos_text;
  }
  return eos_text;
}

std::vector<int32_t> chat_stop_ids(ChatTemplate t, const Tokenizer& tok) {
  const int32_t eos = tok.eos_id();
  const std::string eos_text = eos >= 0 ? tok.piece(eos) : std::string();
  std::vector<int32_t> ids;
  const int32_t end = tok.special_token_id(chat_turn_end_text(t, eos_text));
  if (end >= 0) ids.push_back(end);
  if (eos >= 0 && eos != end) ids.push_back(eos);
  return ids;
}

std::string_view python_strip(std::string_view s) {
  size_t begin = 0;
  while (begin < s.size()) {
    const Utf8Unit u = decode_utf8(s, begin);
    if (!u.valid || !is_python_space(u.cp)) break;
    begin += u.size;
  }
  size_t end = s.size();
  while (end > begin) {
    // Step back to the start of the last character: at most 4 bytes, continuation bytes skipped.
    size_t start = end - 1;
    while (start > begin && end - start < 4 && (static_cast<uint8_t>(s[start]) & 0xC0) == 0x80)
      --start;
    const Utf8Unit u = decode_utf8(s, start);
    if (!u.valid || start + u.size != end || !is_python_space(u.cp)) break;
    end = start;
  }
  return s.substr(begin, end - begin);
}

}  // namespace llmctl
