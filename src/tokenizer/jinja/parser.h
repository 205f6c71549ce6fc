#pragma once
// Recursive-descent parser for Jinja's statements and expressions (jinja2/parser.py).

#include <vector>

#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/lexer.h"

namespace llmctl::jinja {

// The template's top-level statements; throws TemplateError "line L, column C: what".
Body parse(const std::vector<Token>& tokens);

}  // namespace llmctl::jinja
