#pragma once
// The parsed template: expression and statement trees the evaluator walks.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja/value.h"

namespace llmctl::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;
using KwArgs = std::vector<std::pair<std::string, ExprPtr>>;

struct Expr {
  enum Kind { Literal, Name, List, Dict, Attr, Item, Slice, Call, Filter, Test, Unary, Binary, Cond };
  Kind kind = Literal;
  int line = 0;
  std::string name;           // Name, Attr, Filter and Test name; Unary and Binary operator
  Value value;                // Literal
  ExprPtr obj;                // Attr, Item, Slice, Call, Filter, Test: what they apply to
  std::vector<ExprPtr> args;  // List items; Dict keys and values interleaved; call arguments;
                              // Unary/Binary operands; Cond: test, then, else (may be null);
                              // Slice: start, stop, step (each may be null)
  KwArgs kwargs;              // Call, Filter, Test keyword arguments
  bool flag = false;          // List: a tuple; Test: negated ("is not")
};

struct Stmt {
  enum Kind { Text, Output, If, For, Set, SetBlock, Macro, CallBlock, FilterBlock, Generation,
              Break, Continue };
  Kind kind = Text;
  int line = 0;
  std::string text;                   // Text; Set: attribute of a namespace target; Macro name
  std::vector<std::string> targets;   // For and Set names (several: tuple unpacking)
  ExprPtr expr;                       // Output; Set value or namespace; For iterable; CallBlock call
  ExprPtr cond;                       // For filter ("for x in y if cond")
  std::vector<std::pair<ExprPtr, Body>> branches;  // If/elif
  Body body, else_body;
  KwArgs params;                      // Macro and CallBlock parameters with defaults (may be null)
  std::vector<ExprPtr> filters;       // FilterBlock, SetBlock: Filter nodes without obj
  bool recursive = false;             // For
};

}  // namespace llmctl::jinja
