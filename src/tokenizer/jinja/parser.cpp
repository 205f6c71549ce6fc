// Recursive-descent parser: one function per precedence level, as jinja2/parser.py has them.
#include "tokenizer/jinja/parser.h"

#include <fmt/format.h>

#include <cstdlib>
#include <initializer_list>

namespace llmctl::jinja {
namespace {

constexpr int kMaxDepth = 200;  // nesting of expressions and blocks; deeper is an error

class Parser {
 public:
  explicit Parser(const std::vector<Token>& t) : t_(t) {}

  Body parse_all() {
    Body body = parse_body({});
    if (peek().kind != Token::End) fail(peek(), fmt::format("unexpected '{}'", peek().text));
    return body;
  }

 private:
  const Token& peek(size_t ahead = 0) const {
    const size_t i = std::min(i_ + ahead, t_.size() - 1);
    return t_[i];
  }
  const Token& next() { return t_[std::min(i_++, t_.size() - 1)]; }
  [[noreturn]] void fail(const Token& t, const std::string& what) const {
    syntax_error(t.line, t.column, what);
  }
  bool is_op(const char* op, size_t ahead = 0) const {
    return peek(ahead).kind == Token::Op && peek(ahead).text == op;
  }
  bool is_name(const char* name, size_t ahead = 0) const {
    return peek(ahead).kind == Token::Name && peek(ahead).text == name;
  }
  bool accept_op(const char* op) {
    if (!is_op(op)) return false;
    ++i_;
    return true;
  }
  bool accept_name(const char* name) {
    if (!is_name(name)) return false;
    ++i_;
    return true;
  }
  void expect_op(const char* op) {
    if (!accept_op(op)) fail(peek(), fmt::format("expected '{}', got {}", op, describe(peek())));
  }
  void expect_name(const char* name) {
    if (!accept_name(name)) fail(peek(), fmt::format("expected '{}', got {}", name, describe(peek())));
  }
  std::string expect_identifier() {
    if (peek().kind != Token::Name) fail(peek(), fmt::format("expected a name, got {}", describe(peek())));
    return next().text;
  }
  void expect_block_end() {
    if (peek().kind != Token::BlockEnd) fail(peek(), fmt::format("expected '%}}', got {}", describe(peek())));
    ++i_;
  }
  static std::string describe(const Token& t) {
    switch (t.kind) {
      case Token::End: return "end of template";
      case Token::BlockEnd: return "'%}'";
      case Token::VarEnd: return "'}}'";
      case Token::String: return "a string";
      default: return "'" + t.text + "'";
    }
  }

  struct DepthGuard {
    explicit DepthGuard(Parser& p) : p_(p) {
      if (++p_.depth_ > kMaxDepth) p_.fail(p_.peek(), "template nested too deeply");
    }
    ~DepthGuard() { --p_.depth_; }
    Parser& p_;
  };

  // Statements until a block tag whose keyword is in `ends` (left unconsumed after '{%').
  Body parse_body(std::initializer_list<const char*> ends) {
    DepthGuard guard(*this);
    Body body;
    while (true) {
      const Token& t = peek();
      if (t.kind == Token::End) {
        if (ends.size() != 0) {
          std::string names;
          for (const char* e : ends) names += std::string(names.empty() ? "" : " or ") + "'" + e + "'";
          fail(t, "unexpected end of template, expected " + names);
        }
        return body;
      }
      if (t.kind == Token::Text) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Text;
        s->line = t.line;
        s->text = t.text;
        body.push_back(std::move(s));
        ++i_;
      } else if (t.kind == Token::VarBegin) {
        ++i_;
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Output;
        s->line = t.line;
        s->expr = parse_tuple_expr();
        if (peek().kind != Token::VarEnd) fail(peek(), fmt::format("expected '}}}}', got {}", describe(peek())));
        ++i_;
        body.push_back(std::move(s));
      } else if (t.kind == Token::BlockBegin) {
        for (const char* e : ends)
          if (is_name(e, 1)) return body;
        ++i_;
        body.push_back(parse_statement());
      } else {
        fail(t, fmt::format("unexpected {}", describe(t)));
      }
    }
  }

  void end_tag(const char* name) {  // '{%' name '%}'
    ++i_;  // BlockBegin
    expect_name(name);
    expect_block_end();
  }

  StmtPtr parse_statement() {
    const Token& t = peek();
    auto s = std::make_unique<Stmt>();
    s->line = t.line;
    if (t.kind != Token::Name) fail(t, "expected a statement name");
    const std::string kw = next().text;
    if (kw == "if") {
      s->kind = Stmt::If;
      ExprPtr cond = parse_tuple_expr();
      expect_block_end();
      while (true) {
        Body b = parse_body({"elif", "else", "endif"});
        s->branches.emplace_back(std::move(cond), std::move(b));
        ++i_;
        const std::string which = next().text;
        if (which == "elif") {
          cond = parse_tuple_expr();
          expect_block_end();
          continue;
        }
        expect_block_end();
        if (which == "else") {
          s->else_body = parse_body({"endif"});
          end_tag("endif");
        }
        break;
      }
    } else if (kw == "for") {
      s->kind = Stmt::For;
      do s->targets.push_back(expect_identifier());
      while (accept_op(","));
      expect_name("in");
      s->expr = parse_tuple_expr(/*allow_cond=*/false);
      if (accept_name("if")) s->cond = parse_expression();
      if (accept_name("recursive")) s->recursive = true;
      expect_block_end();
      ++loop_depth_;
      s->body = parse_body({"else", "endfor"});
      --loop_depth_;
      if (is_name("else", 1)) {
        end_tag("else");
        s->else_body = parse_body({"endfor"});
      }
      end_tag("endfor");
    } else if (kw == "set") {
      s->kind = Stmt::Set;
      do s->targets.push_back(expect_identifier());
      while (accept_op(","));
      if (s->targets.size() == 1 && accept_op(".")) s->text = expect_identifier();
      if (accept_op("=")) {
        s->expr = parse_tuple_expr();
        expect_block_end();
      } else {
        if (s->targets.size() != 1 || !s->text.empty()) fail(peek(), "expected '='");
        s->kind = Stmt::SetBlock;
        while (accept_op("|")) s->filters.push_back(parse_filter(nullptr));
        expect_block_end();
        s->body = parse_body({"endset"});
        end_tag("endset");
      }
    } else if (kw == "macro") {
      s->kind = Stmt::Macro;
      s->text = expect_identifier();
      parse_params(s->params);
      expect_block_end();
      s->body = parse_body({"endmacro"});
      end_tag("endmacro");
    } else if (kw == "call") {
      s->kind = Stmt::CallBlock;
      if (is_op("(")) parse_params(s->params);
      s->expr = parse_expression();
      expect_block_end();
      s->body = parse_body({"endcall"});
      end_tag("endcall");
    } else if (kw == "filter") {
      s->kind = Stmt::FilterBlock;
      do s->filters.push_back(parse_filter(nullptr));
      while (accept_op("|"));
      expect_block_end();
      s->body = parse_body({"endfilter"});
      end_tag("endfilter");
    } else if (kw == "generation") {
      s->kind = Stmt::Generation;
      expect_block_end();
      s->body = parse_body({"endgeneration"});
      end_tag("endgeneration");
    } else if (kw == "break" || kw == "continue") {
      if (loop_depth_ == 0) fail(t, fmt::format("'{}' outside of a for loop", kw));
      s->kind = kw == "break" ? Stmt::Break : Stmt::Continue;
      expect_block_end();
    } else {
      fail(t, fmt::format("unknown tag '{}'", kw));
    }
    return s;
  }

  void parse_params(KwArgs& params) {
    expect_op("(");
    while (!accept_op(")")) {
      if (!params.empty()) expect_op(",");
      if (accept_op(")")) break;
      std::string name = expect_identifier();
      ExprPtr def;
      if (accept_op("=")) def = parse_expression();
      params.emplace_back(std::move(name), std::move(def));
    }
  }

  ExprPtr make(Expr::Kind k, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = line;
    return e;
  }

  // expr (',' expr)* as a tuple when there is a comma.
  ExprPtr parse_tuple_expr(bool allow_cond = true) {
    const int line = peek().line;
    ExprPtr first = allow_cond ? parse_expression() : parse_or();
    if (!is_op(",")) return first;
    auto t = make(Expr::List, line);
    t->flag = true;
    t->args.push_back(std::move(first));
    while (accept_op(",")) {
      if (peek().kind == Token::VarEnd || peek().kind == Token::BlockEnd || is_op(")")) break;
      t->args.push_back(allow_cond ? parse_expression() : parse_or());
    }
    return t;
  }

  ExprPtr parse_expression() {
    DepthGuard guard(*this);
    const int line = peek().line;
    ExprPtr e = parse_or();
    while (accept_name("if")) {
      auto c = make(Expr::Cond, line);
      c->args.push_back(parse_or());  // test
      c->args.push_back(std::move(e));  // then
      c->args.push_back(accept_name("else") ? parse_expression() : nullptr);
      e = std::move(c);
    }
    return e;
  }

  ExprPtr binary(const std::string& op, ExprPtr a, ExprPtr b, int line) {
    auto e = make(Expr::Binary, line);
    e->name = op;
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr e = parse_and();
    while (is_name("or")) {
      const int line = next().line;
      e = binary("or", std::move(e), parse_and(), line);
    }
    return e;
  }
  ExprPtr parse_and() {
    ExprPtr e = parse_not();
    while (is_name("and")) {
      const int line = next().line;
      e = binary("and", std::move(e), parse_not(), line);
    }
    return e;
  }
  ExprPtr parse_not() {
    if (is_name("not")) {
      DepthGuard guard(*this);
      auto e = make(Expr::Unary, next().line);
      e->name = "not";
      e->args.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }
  ExprPtr parse_compare() {
    ExprPtr e = parse_math1();
    while (true) {
      const Token& t = peek();
      std::string op;
      if (t.kind == Token::Op && (t.text == "==" || t.text == "!=" || t.text == "<" ||
                                  t.text == "<=" || t.text == ">" || t.text == ">="))
        op = t.text;
      else if (is_name("in")) op = "in";
      else if (is_name("not") && is_name("in", 1)) op = "not in";
      else return e;
      i_ += op == "not in" ? 2u : 1u;
      e = binary(op, std::move(e), parse_math1(), t.line);
    }
  }
  ExprPtr parse_math1() {
    ExprPtr e = parse_concat();
    while (is_op("+") || is_op("-")) {
      const Token& t = next();
      e = binary(t.text, std::move(e), parse_concat(), t.line);
    }
    return e;
  }
  ExprPtr parse_concat() {
    ExprPtr e = parse_math2();
    while (is_op("~")) {
      const int line = next().line;
      e = binary("~", std::move(e), parse_math2(), line);
    }
    return e;
  }
  ExprPtr parse_math2() {
    ExprPtr e = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& t = next();
      e = binary(t.text, std::move(e), parse_pow(), t.line);
    }
    return e;
  }
  ExprPtr parse_pow() {
    ExprPtr e = parse_unary(true);
    while (is_op("**")) {
      const int line = next().line;
      e = binary("**", std::move(e), parse_unary(true), line);
    }
    return e;
  }
  ExprPtr parse_unary(bool with_filter) {
    DepthGuard guard(*this);
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      e = make(Expr::Unary, peek().line);
      e->name = next().text;
      e->args.push_back(parse_unary(false));
    } else {
      e = parse_postfix(parse_primary());
    }
    return with_filter ? parse_filter_expr(std::move(e)) : std::move(e);
  }

  ExprPtr parse_primary() {
    const Token& t = peek();
    if (t.kind == Token::Name) {
      ++i_;
      auto e = make(Expr::Literal, t.line);
      if (t.text == "true" || t.text == "True") e->value = true;
      else if (t.text == "false" || t.text == "False") e->value = false;
      else if (t.text == "none" || t.text == "None") e->value = None{};
      else {
        e->kind = Expr::Name;
        e->name = t.text;
      }
      return e;
    }
    if (t.kind == Token::String) {
      auto e = make(Expr::Literal, t.line);
      std::string s;
      while (peek().kind == Token::String) s += next().text;  // "a" "b" is "ab"
      e->value = std::move(s);
      return e;
    }
    if (t.kind == Token::Int || t.kind == Token::Float) {
      ++i_;
      auto e = make(Expr::Literal, t.line);
      if (t.kind == Token::Int) {
        errno = 0;
        const long long v = std::strtoll(t.text.c_str(), nullptr, 10);
        if (errno == ERANGE) fail(t, "integer literal out of range");
        e->value = static_cast<int64_t>(v);
      } else {
        e->value = std::strtod(t.text.c_str(), nullptr);
      }
      return e;
    }
    if (accept_op("(")) {
      if (accept_op(")")) {
        auto e = make(Expr::List, t.line);
        e->flag = true;
        return e;
      }
      ExprPtr e = parse_tuple_expr();
      expect_op(")");
      return e;
    }
    if (accept_op("[")) {
      auto e = make(Expr::List, t.line);
      while (!accept_op("]")) {
        if (!e->args.empty()) expect_op(",");
        if (accept_op("]")) break;
        e->args.push_back(parse_expression());
      }
      return e;
    }
    if (accept_op("{")) {
      auto e = make(Expr::Dict, t.line);
      while (!accept_op("}")) {
        if (!e->args.empty()) expect_op(",");
        if (accept_op("}")) break;
        e->args.push_back(parse_expression());
        expect_op(":");
        e->args.push_back(parse_expression());
      }
      return e;
    }
    fail(t, fmt::format("unexpected {}", describe(t)));
  }

  ExprPtr parse_postfix(ExprPtr e) {
    while (true) {
      const int line = peek().line;
      if (accept_op(".")) {
        auto a = make(Expr::Attr, line);
        if (peek().kind == Token::Int) {  // x.0 is x[0]
          a->kind = Expr::Item;
          auto idx = make(Expr::Literal, line);
          idx->value = static_cast<int64_t>(std::strtoll(next().text.c_str(), nullptr, 10));
          a->args.push_back(std::move(idx));
        } else {
          a->name = expect_identifier();
        }
        a->obj = std::move(e);
        e = std::move(a);
      } else if (accept_op("[")) {
        e = parse_subscript(std::move(e), line);
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr obj, int line) {
    ExprPtr parts[3];
    bool slice = false;
    size_t part = 0;
    while (!accept_op("]")) {
      if (accept_op(":")) {
        slice = true;
        if (++part > 2) fail(peek(), "too many ':' in a slice");
        continue;
      }
      if (parts[part]) fail(peek(), "expected ':' or ']'");
      parts[part] = parse_expression();
    }
    auto e = make(slice ? Expr::Slice : Expr::Item, line);
    if (!slice && !parts[0]) fail(peek(), "empty subscript");
    e->obj = std::move(obj);
    for (size_t k = 0; k < (slice ? 3u : 1u); ++k) e->args.push_back(std::move(parts[k]));
    return e;
  }

  void parse_args(std::vector<ExprPtr>& args, KwArgs& kwargs) {
    expect_op("(");
    bool first = true;
    while (!accept_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (accept_op(")")) break;
      if (peek().kind == Token::Name && is_op("=", 1)) {
        std::string name = next().text;
        ++i_;
        kwargs.emplace_back(std::move(name), parse_expression());
      } else {
        if (!kwargs.empty()) fail(peek(), "positional argument after keyword argument");
        args.push_back(parse_expression());
      }
    }
  }

  ExprPtr parse_call(ExprPtr fn) {
    auto e = make(Expr::Call, peek().line);
    e->obj = std::move(fn);
    parse_args(e->args, e->kwargs);
    return e;
  }

  // name ('.' name)* ['(' args ')'] applied to `input` (null for filter blocks).
  ExprPtr parse_filter(ExprPtr input) {
    auto e = make(Expr::Filter, peek().line);
    e->name = expect_identifier();
    while (accept_op(".")) e->name += "." + expect_identifier();
    if (is_op("(")) parse_args(e->args, e->kwargs);
    e->obj = std::move(input);
    return e;
  }

  ExprPtr parse_filter_expr(ExprPtr e) {
    while (true) {
      if (accept_op("|")) {
        e = parse_filter(std::move(e));
      } else if (is_name("is")) {
        auto t = make(Expr::Test, next().line);
        t->flag = accept_name("not");
        t->name = expect_identifier();
        if (is_op("(")) {
          parse_args(t->args, t->kwargs);
        } else if (peek().kind == Token::String || peek().kind == Token::Int ||
                   peek().kind == Token::Float || is_op("[") || is_op("{") ||
                   (peek().kind == Token::Name && !is_name("else") && !is_name("or") &&
                    !is_name("and") && !is_name("if") && !is_name("in") && !is_name("not") &&
                    !is_name("is"))) {
          t->args.push_back(parse_postfix(parse_primary()));
        }
        t->obj = std::move(e);
        e = std::move(t);
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  const std::vector<Token>& t_;
  size_t i_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;  // for-loop bodies around the current statement
};

}  // namespace

Body parse(const std::vector<Token>& tokens) { return Parser(tokens).parse_all(); }

}  // namespace llmctl::jinja
