// libFuzzer target for chat templates: detect_chat_template on the whole input as a Jinja
// source, and render_chat of a conversation decoded from the input with every template.
//
// Input layout: byte 0 = flags (bit 0: add_generation_prompt), then messages separated by
// 0x00 bytes, each starting with a role byte (value % 3: system, user, assistant).
// Properties checked: nothing but llmctl::Error escapes (llama2's alternation rule); every
// chatml rendering holds each content verbatim; python_strip is idempotent and returns a
// substring; chat_template_from_name(name(t)) == t.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "tokenizer/chat_template.h"

namespace {

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "fuzz_chat_template: property violated: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  (void)llmctl::detect_chat_template(all);
  if (size == 0) return 0;

  const bool gen = (data[0] & 1) != 0;
  std::vector<llmctl::ChatMessage> messages;
  std::string_view rest = all.substr(1);
  while (!rest.empty()) {
    const size_t cut = rest.find('\0');
    std::string_view field = rest.substr(0, cut);
    rest = cut == std::string_view::npos ? std::string_view() : rest.substr(cut + 1);
    if (field.empty()) continue;
    const auto role = static_cast<llmctl::ChatRole>(static_cast<uint8_t>(field[0]) % 3);
    messages.push_back({role, std::string(field.substr(1))});
  }

  for (const llmctl::ChatTemplate t :
       {llmctl::ChatTemplate::Llama2, llmctl::ChatTemplate::Llama3, llmctl::ChatTemplate::ChatML,
        llmctl::ChatTemplate::Zephyr}) {
    if (llmctl::chat_template_from_name(llmctl::chat_template_name(t)) != t)
      finding("name round trip");
    try {
      const std::string out = llmctl::render_chat(t, messages, gen, "<s>", "</s>");
      if (t == llmctl::ChatTemplate::ChatML)
        for (const auto& m : messages)
          if (out.find(m.content) == std::string::npos) finding("chatml lost a message");
    } catch (const llmctl::Error&) {
      if (t != llmctl::ChatTemplate::Llama2) finding("only llama2 may reject a conversation");
    }
  }
  for (const auto& m : messages) {
    const std::string_view s = llmctl::python_strip(m.content);
    if (llmctl::python_strip(s) != s) finding("python_strip is not idempotent");
    if (s.data() < m.content.data() || s.data() + s.size() > m.content.data() + m.content.size())
      finding("python_strip left the input");
  }
  return 0;
}
