#pragma once
// The tree-walking evaluator: statements write to the output, expressions compute Values.

#include <memory>
#include <string>
#include <string_view>

#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/jinja.h"

namespace llmctl::jinja {

// A render error that already names its template line (so outer statements keep it).
class LocatedError : public TemplateError {
  using TemplateError::TemplateError;
};

struct Scope {
  std::vector<std::pair<std::string, Value>> vars;
  std::shared_ptr<Scope> parent;
  Value* find(std::string_view name);
  void set(const std::string& name, Value v);
};
using ScopePtr = std::shared_ptr<Scope>;

class Evaluator {
 public:
  Evaluator(const Options& opt, ScopePtr globals) : opt_(opt), globals_(std::move(globals)) {}
  std::string render(const Body& body);

  Value eval(const Expr& e, const ScopePtr& scope);
  // Jinja's filters, tests and Python's methods (builtins.cpp); throw TemplateError.
  Value apply_filter(const std::string& name, const Value& input, CallArgs& args);
  bool apply_test(const std::string& name, const Value& input, CallArgs& args);
  Value call(const Value& fn, CallArgs& args);
  const Options& options() const { return opt_; }

 private:
  enum class Flow { Normal, Break, Continue };
  Flow exec(const Body& body, const ScopePtr& scope, std::string& out);
  Flow exec_stmt(const Stmt& s, const ScopePtr& scope, std::string& out);
  void exec_for(const Stmt& s, const ScopePtr& scope, std::string& out, const Value& iterable,
                int depth);
  void assign(const Stmt& s, const ScopePtr& scope, Value v);
  static void bind_names(const std::vector<std::string>& names, const Value& v, Scope& scope);
  Value make_macro(const Stmt& s, const ScopePtr& scope, const std::string& name);
  Value eval_binary(const Expr& e, const ScopePtr& scope);
  CallArgs eval_args(const Expr& e, const ScopePtr& scope);
  void check_output(const std::string& out) const;

  const Options& opt_;
  ScopePtr globals_;
  int call_depth_ = 0;
  std::vector<ScopePtr> pinned_scopes_;  // scopes that macros close over
  int64_t iterations_ = 0;
};

// Attribute and item lookup with Jinja's rules (getattr first for '.', item first for '[]').
Value get_attr(const Value& obj, const std::string& name);
Value get_item(const Value& obj, const Value& key);
// A bound method of a str, list or dict (Python's), or Undefined when there is none.
Value get_method(const Value& obj, const std::string& name);
// The error an operation on an undefined value raises.
[[noreturn]] void undefined_error(const Value& v);
// Python's binary operators on numbers, strings and lists: + - * / // % **.
Value arithmetic(const std::string& op, const Value& a, const Value& b);

}  // namespace llmctl::jinja
