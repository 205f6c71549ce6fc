#pragma once
// Jinja's lexer with Hugging Face's settings: template text, {{ }}, {% %}, {# #} with the
// whitespace rules (trim_blocks, lstrip_blocks, '-' and '+' modifiers) applied to the text
// here, so the parser sees text exactly as it will print.

#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/jinja/jinja.h"

namespace llmctl::jinja {

struct Token {
  enum Kind { Text, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, End };
  Kind kind = End;
  std::string text;  // Text, Name, Op, the number's digits, the unescaped String
  int line = 1, column = 1;
};

std::vector<Token> lex(std::string_view source, const Options& opt);

// "line L, column C: what" as a TemplateError.
[[noreturn]] void syntax_error(int line, int column, const std::string& what);

}  // namespace llmctl::jinja
