// Statements and expressions: Jinja's scoping (for and macro bodies get their own scope, if
// does not), loops with the loop object, macros as closures, and Python's operators.
#include "tokenizer/jinja/evaluator.h"

#include <fmt/format.h>

#include <cmath>

namespace llmctl::jinja {

namespace {
constexpr size_t kMaxOutput = 64u << 20;       // bytes one render may produce
constexpr int kMaxCallDepth = 100;             // nested macro calls
constexpr int64_t kMaxIterations = 10'000'000;  // loop iterations of one render
// Counts nested macro and recursive-loop calls; too many is an error, not a stack overflow.
struct CallDepth {
  explicit CallDepth(int& depth) : depth_(depth) {
    if (depth_ >= kMaxCallDepth) throw TemplateError("maximum recursion depth exceeded (macro or recursive loop)");
    ++depth_;
  }
  ~CallDepth() { --depth_; }
  CallDepth(const CallDepth&) = delete;
  CallDepth& operator=(const CallDepth&) = delete;
  int& depth_;
};

}  // namespace

Value* Scope::find(std::string_view name) {
  for (Scope* s = this; s; s = s->parent.get())
    for (auto& [k, v] : s->vars)
      if (k == name) return &v;
  return nullptr;
}

void Scope::set(const std::string& name, Value v) {
  for (auto& [k, old] : vars)
    if (k == name) {
      old = std::move(v);
      return;
    }
  vars.emplace_back(name, std::move(v));
}

void undefined_error(const Value& v) {
  throw TemplateError(v.is_undefined() ? v.undefined_reason() : "value is undefined");
}

std::string Evaluator::render(const Body& body) {
  std::string out;
  auto scope = std::make_shared<Scope>();
  scope->parent = globals_;
  exec(body, scope, out);
  return out;
}

void Evaluator::check_output(const std::string& out) const {
  if (out.size() > kMaxOutput)
    throw TemplateError(fmt::format("output exceeds {} MiB; the template loops or is too large",
                                    kMaxOutput >> 20));
}

Evaluator::Flow Evaluator::exec(const Body& body, const ScopePtr& scope, std::string& out) {
  for (const auto& s : body) {
    Flow f = Flow::Normal;
    try {
      f = exec_stmt(*s, scope, out);
    } catch (const LocatedError&) {
      throw;
    } catch (const RaisedException&) {
      throw;
    } catch (const TemplateError& e) {
      throw LocatedError(fmt::format("line {}: {}", s->line, e.what()));
    }
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

static Value apply_filters(Evaluator& ev, const std::vector<ExprPtr>& filters, Value v,
                           const ScopePtr& scope) {
  for (const auto& f : filters) {
    CallArgs args;
    for (const auto& a : f->args) args.pos.push_back(ev.eval(*a, scope));
    for (const auto& [k, a] : f->kwargs) args.kw.emplace_back(k, ev.eval(*a, scope));
    v = ev.apply_filter(f->name, v, args);
  }
  return v;
}

Evaluator::Flow Evaluator::exec_stmt(const Stmt& s, const ScopePtr& scope, std::string& out) {
  switch (s.kind) {
    case Stmt::Text: out += s.text; break;
    case Stmt::Output: {
      const Value v = eval(*s.expr, scope);
      out += to_str(v);
      break;
    }
    case Stmt::If: {
      for (const auto& [cond, body] : s.branches)
        if (truthy(eval(*cond, scope))) return exec(body, scope, out);
      return exec(s.else_body, scope, out);
    }
    case Stmt::For: exec_for(s, scope, out, eval(*s.expr, scope), 0); break;
    case Stmt::Set: assign(s, scope, eval(*s.expr, scope)); break;
    case Stmt::SetBlock: {
      std::string text;
      exec(s.body, scope, text);
      assign(s, scope, apply_filters(*this, s.filters, Value(std::move(text)), scope));
      break;
    }
    case Stmt::Macro: scope->set(s.text, make_macro(s, scope, s.text)); break;
    case Stmt::CallBlock: {
      const Expr& call_expr = *s.expr;
      if (call_expr.kind != Expr::Call) throw TemplateError("expected a call after 'call'");
      const Value fn = eval(*call_expr.obj, scope);
      CallArgs args = eval_args(call_expr, scope);
      args.kw.emplace_back("caller", make_macro(s, scope, "caller"));
      out += to_str(call(fn, args));
      break;
    }
    case Stmt::FilterBlock: {
      std::string text;
      exec(s.body, scope, text);
      out += to_str(apply_filters(*this, s.filters, Value(std::move(text)), scope));
      break;
    }
    case Stmt::Generation: return exec(s.body, scope, out);
    case Stmt::Break: return Flow::Break;
    case Stmt::Continue: return Flow::Continue;
  }
  check_output(out);
  return Flow::Normal;
}

void Evaluator::assign(const Stmt& s, const ScopePtr& scope, Value v) {
  if (!s.text.empty()) {  // {% set ns.attr = v %}
    Value* ns = scope->find(s.targets[0]);
    if (!ns || !ns->is_object() || !std::get<ObjectRef>(ns->v).is_namespace)
      throw TemplateError("cannot assign attribute on non-namespace object");
    if (Value* old = find_key(*ns, s.text)) *old = std::move(v);
    else ns->obj().emplace_back(Value(s.text), std::move(v));
    return;
  }
  bind_names(s.targets, v, *scope);
}

// name = v, or a, b = v unpacked (for loops and set alike).
void Evaluator::bind_names(const std::vector<std::string>& names, const Value& v, Scope& scope) {
  if (names.size() == 1) {
    scope.set(names[0], v);
    return;
  }
  const Array items = iterate(v);
  if (items.size() != names.size())
    throw TemplateError(fmt::format("cannot unpack {} values into {} names", items.size(),
                                    names.size()));
  for (size_t i = 0; i < items.size(); ++i) scope.set(names[i], items[i]);
}

void Evaluator::exec_for(const Stmt& s, const ScopePtr& scope, std::string& out,
                         const Value& iterable, int depth) {
  // An undefined value iterates as an empty loop (Jinja's Undefined.__iter__).
  if (!iterable.is_undefined() && !iterable.is_array() && !iterable.is_object() &&
      !iterable.is_string()) {
    throw TemplateError(fmt::format("'{}' object is not iterable", type_name(iterable)));
  }
  // Each iteration starts from the enclosing scope: a set in the body neither survives the
  // loop nor the iteration (Jinja loads outer names afresh every iteration).
  ScopePtr loop_scope;
  const auto bind = [&](const Value& item) {
    loop_scope = std::make_shared<Scope>();
    loop_scope->parent = scope;
    bind_names(s.targets, item, *loop_scope);
  };
  Array items;
  for (const Value& item : iterate(iterable)) {
    if (s.cond) {
      bind(item);
      if (!truthy(eval(*s.cond, loop_scope))) continue;
    }
    items.push_back(item);
  }
  if (items.empty()) {
    exec(s.else_body, scope, out);
    return;
  }
  const auto n = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < n; ++i) {
    if (++iterations_ > kMaxIterations) throw TemplateError("too many loop iterations");
    const auto u = static_cast<size_t>(i);
    bind(items[u]);
    Object loop{{"index0", i},        {"index", i + 1},         {"revindex", n - i},
                {"revindex0", n - i - 1}, {"first", i == 0},    {"last", i == n - 1},
                {"length", n},         {"depth", depth + 1},     {"depth0", depth}};
    loop.emplace_back("previtem", i > 0 ? items[u - 1] : Value::undefined("there is no previous item"));
    loop.emplace_back("nextitem", i + 1 < n ? items[u + 1] : Value::undefined("there is no next item"));
    loop.emplace_back("cycle", Value::function("cycle", [i](CallArgs& a) -> Value {
      if (a.pos.empty()) throw TemplateError("no items for cycling given");
      return a.pos[static_cast<size_t>(i) % a.pos.size()];
    }));
    if (s.recursive) {
      // loop(children) may be kept past this loop ({% set ns.l = loop %}): hold the scope
      // weakly and pinned, as macros do.
      pinned_scopes_.push_back(scope);
      std::weak_ptr<Scope> weak = scope;
      loop.emplace_back("__call__", Value::function("loop", [this, &s, weak, depth](CallArgs& a) -> Value {
        if (a.pos.size() != 1) throw TemplateError("loop() takes exactly one argument");
        const CallDepth guard(call_depth_);
        const ScopePtr outer = weak.lock();
        if (!outer) throw TemplateError("loop() called after its render ended");
        std::string text;
        exec_for(s, outer, text, a.pos[0], depth + 1);
        return Value(std::move(text));
      }));
    }
    loop_scope->set("loop", Value::object(std::move(loop)));
    const Flow f = exec(s.body, loop_scope, out);
    if (f == Flow::Break) break;
  }
}

Value Evaluator::make_macro(const Stmt& s, const ScopePtr& scope, const std::string& name) {
  // The macro lives in the scope it closes over: it holds the scope weakly (a strong
  // reference would be a cycle that leaks) and the evaluator keeps the scope alive.
  pinned_scopes_.push_back(scope);
  std::weak_ptr<Scope> weak = scope;
  return Value::function(name, [this, &s, weak](CallArgs& a) -> Value {
    const CallDepth guard(call_depth_);
    auto local = std::make_shared<Scope>();
    local->parent = weak.lock();
    if (!local->parent) throw TemplateError("macro called after its render ended");
    for (size_t i = 0; i < s.params.size(); ++i) {
      const auto& [pname, def] = s.params[i];
      const Value* given = a.get(i, pname);
      if (given) local->set(pname, *given);
      else if (def) local->set(pname, eval(*def, local));
      else local->set(pname, Value::undefined(fmt::format("'{}' is undefined", pname)));
    }
    Array varargs;
    for (size_t i = s.params.size(); i < a.pos.size(); ++i) varargs.push_back(a.pos[i]);
    local->set("varargs", Value::array(std::move(varargs)));
    Object kwargs;
    for (const auto& [k, v] : a.kw) {
      bool is_param = false;
      for (const auto& p : s.params) is_param = is_param || p.first == k;
      if (k == "caller") local->set("caller", v);
      else if (!is_param) kwargs.emplace_back(Value(k), v);
    }
    local->set("kwargs", Value::object(std::move(kwargs)));
    std::string text;
    exec(s.body, local, text);
    return Value(std::move(text));
  });
}

Value Evaluator::call(const Value& fn, CallArgs& args) {
  if (fn.is_callable()) return (*fn.callable().fn)(args);
  if (const Value* c = find_key(fn, "__call__"); c && c->is_callable()) return (*c->callable().fn)(args);
  if (fn.is_undefined()) undefined_error(fn);
  throw TemplateError(fmt::format("'{}' object is not callable", type_name(fn)));
}

CallArgs Evaluator::eval_args(const Expr& e, const ScopePtr& scope) {
  CallArgs args;
  for (const auto& a : e.args) args.pos.push_back(eval(*a, scope));
  for (const auto& [k, a] : e.kwargs) args.kw.emplace_back(k, eval(*a, scope));
  return args;
}

static int64_t slice_index(const Value* v, int64_t def, int64_t n) {
  if (!v || v->is_none()) return def;
  if (!v->is_int() && !v->is_bool()) throw TemplateError("slice indices must be integers or None");
  int64_t i = v->as_int();
  if (i < 0) i += n;
  return i;
}

static Value slice(const Value& obj, const Value* start, const Value* stop, const Value* step_v) {
  const bool is_str = obj.is_string();
  if (obj.is_undefined()) undefined_error(obj);
  if (!is_str && !obj.is_array()) throw TemplateError(fmt::format("'{}' object is not subscriptable", type_name(obj)));
  std::vector<std::string> chars;
  if (is_str) chars = code_points(obj.str());
  const int64_t n = is_str ? static_cast<int64_t>(chars.size()) : static_cast<int64_t>(obj.arr().size());
  const int64_t step = step_v && !step_v->is_none() ? step_v->as_int() : 1;
  if (step == 0) throw TemplateError("slice step cannot be zero");
  int64_t lo = slice_index(start, step > 0 ? 0 : n - 1, n);
  int64_t hi = slice_index(stop, step > 0 ? n : -1, n);
  if (stop && !stop->is_none() && stop->as_int() < 0 && hi < 0) hi = step > 0 ? 0 : -1;
  if (start && !start->is_none() && start->as_int() < 0 && lo < 0) lo = step > 0 ? 0 : -1;
  if (step > 0) { lo = std::min(std::max<int64_t>(lo, 0), n); hi = std::min(hi, n); }
  else { lo = std::min(lo, n - 1); hi = std::max<int64_t>(hi, -1); }
  std::string s;
  Array a;
  for (int64_t i = lo; step > 0 ? i < hi : i > hi; i += step) {
    const auto u = static_cast<size_t>(i);
    if (is_str) s += chars[u];
    else a.push_back(obj.arr()[u]);
  }
  if (is_str) return Value(std::move(s));
  return Value::array(std::move(a));
}

Value Evaluator::eval(const Expr& e, const ScopePtr& scope) {
  switch (e.kind) {
    case Expr::Literal: return e.value;
    case Expr::Name: {
      if (Value* v = scope->find(e.name)) return *v;
      return Value::undefined(fmt::format("'{}' is undefined", e.name));
    }
    case Expr::List: {
      Array a;
      for (const auto& x : e.args) a.push_back(eval(*x, scope));
      return Value::array(std::move(a), e.flag);
    }
    case Expr::Dict: {
      Value d = Value::object();
      for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
        Value key = eval(*e.args[i], scope);
        if (!key.is_string() && !key.is_number() && !key.is_none() && !key.is_array())
          throw TemplateError(fmt::format("unhashable type: '{}'", type_name(key)));
        Value v = eval(*e.args[i + 1], scope);
        if (Value* old = find_item(d, key)) *old = std::move(v);
        else d.obj().emplace_back(std::move(key), std::move(v));
      }
      return d;
    }
    case Expr::Attr: return get_attr(eval(*e.obj, scope), e.name);
    case Expr::Item: return get_item(eval(*e.obj, scope), eval(*e.args[0], scope));
    case Expr::Slice: {
      const Value obj = eval(*e.obj, scope);
      Value parts[3];
      for (size_t i = 0; i < 3; ++i)
        if (e.args[i]) parts[i] = eval(*e.args[i], scope);
      return slice(obj, e.args[0] ? &parts[0] : nullptr, e.args[1] ? &parts[1] : nullptr,
                   e.args[2] ? &parts[2] : nullptr);
    }
    case Expr::Call: {
      const Value fn = eval(*e.obj, scope);
      CallArgs args = eval_args(e, scope);
      return call(fn, args);
    }
    case Expr::Filter: {
      const Value input = eval(*e.obj, scope);
      CallArgs args = eval_args(e, scope);
      return apply_filter(e.name, input, args);
    }
    case Expr::Test: {
      const Value input = eval(*e.obj, scope);
      CallArgs args = eval_args(e, scope);
      return apply_test(e.name, input, args) != e.flag;
    }
    case Expr::Unary: {
      const Value x = eval(*e.args[0], scope);
      if (e.name == "not") return !truthy(x);
      if (x.is_undefined()) undefined_error(x);
      if (!x.is_number()) throw TemplateError(fmt::format("bad operand type for unary {}: '{}'", e.name, type_name(x)));
      if (e.name == "+") return x.is_float() ? x : Value(x.as_int());
      return x.is_float() ? Value(-x.as_double()) : Value(-x.as_int());
    }
    case Expr::Binary: return eval_binary(e, scope);
    case Expr::Cond: {
      if (truthy(eval(*e.args[0], scope))) return eval(*e.args[1], scope);
      if (e.args[2]) return eval(*e.args[2], scope);
      return Value::undefined("the inline if-expression evaluated to false and no else section was defined.");
    }
  }
  return Value();
}

static bool contains(const Value& container, const Value& item) {
  if (container.is_string()) {
    if (!item.is_string())
      throw TemplateError(fmt::format("'in <string>' requires string as left operand, not {}", type_name(item)));
    return container.str().find(item.str()) != std::string::npos;
  }
  if (container.is_array()) {
    for (const Value& x : container.arr())
      if (equal(x, item)) return true;
    return false;
  }
  if (container.is_object()) return find_item(container, item) != nullptr;
  if (container.is_undefined()) return false;
  throw TemplateError(fmt::format("argument of type '{}' is not iterable", type_name(container)));
}

Value Evaluator::eval_binary(const Expr& e, const ScopePtr& scope) {
  const std::string& op = e.name;
  const Value a = eval(*e.args[0], scope);
  if (op == "and") return truthy(a) ? eval(*e.args[1], scope) : a;
  if (op == "or") return truthy(a) ? a : eval(*e.args[1], scope);
  const Value b = eval(*e.args[1], scope);
  if (op == "==") return equal(a, b);
  if (op == "!=") return !equal(a, b);
  if (op == "in") return contains(b, a);
  if (op == "not in") return !contains(b, a);
  if (op == "~") return to_str(a) + to_str(b);
  if (op == "<" || op == "<=" || op == ">" || op == ">=") {
    if (a.is_undefined()) undefined_error(a);
    if (b.is_undefined()) undefined_error(b);
    const int c = compare(a, b);
    if (op == "<") return c < 0;
    if (op == "<=") return c <= 0;
    if (op == ">") return c > 0;
    return c >= 0;
  }
  return arithmetic(op, a, b);
}

}  // namespace llmctl::jinja
