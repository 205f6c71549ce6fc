#pragma once
// A small Jinja engine for chat templates (tokenizer.chat_template), with the semantics of
// Hugging Face transformers' apply_chat_template: ImmutableSandboxedEnvironment with
// trim_blocks, lstrip_blocks and loopcontrols, globals raise_exception() and strftime_now(),
// its own tojson filter, and the {% generation %} tag rendered as its body. Checked byte for
// byte against Python jinja2 on real templates (tests/test_jinja_golden.cpp).

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "core/error.h"

namespace llmctl::jinja {

// A template error: parse errors say "line L, column C: what"; render errors say the line.
class TemplateError : public Error {
  using Error::Error;
};
// Raised by the template itself through raise_exception(msg): what() is exactly msg.
class RaisedException : public TemplateError {
  using TemplateError::TemplateError;
};

struct Options {
  bool trim_blocks = true;  // Hugging Face's settings
  bool lstrip_blocks = true;
  // strftime_now() uses this time (seconds since the epoch, UTC); unset: SOURCE_DATE_EPOCH
  // when that environment variable is set, else the current time.
  std::optional<int64_t> now;
};

class Template {
 public:
  explicit Template(std::string_view source, Options opt = {});  // parses once; throws TemplateError
  // Renders with `context` as the global variables (messages, bos_token, eos_token,
  // add_generation_prompt, tools, ...; any JSON object). Key order of objects is kept
  // (ordered_json) because `tojson` and `|items` print them in the given order.
  std::string render(const nlohmann::ordered_json& context) const;
  ~Template();
  Template(Template&&) noexcept;
  Template& operator=(Template&&) noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace llmctl::jinja
