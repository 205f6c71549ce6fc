// Template: parse once, render with Hugging Face's globals (raise_exception, strftime_now,
// namespace, range, dict) under the caller's context variables.
#include "tokenizer/jinja/jinja.h"

#include <fmt/format.h>

#include <cstdlib>
#include <ctime>

#include "tokenizer/jinja/evaluator.h"
#include "tokenizer/jinja/lexer.h"
#include "tokenizer/jinja/parser.h"

namespace llmctl::jinja {

struct Template::Impl {
  Options opt;
  Body body;
};

Template::Template(std::string_view source, Options opt) : impl_(std::make_unique<Impl>()) {
  impl_->opt = std::move(opt);
  impl_->body = parse(lex(source, impl_->opt));
}

Template::~Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;

namespace {

int64_t now_seconds(const Options& opt) {
  if (opt.now) return *opt.now;
  if (const char* e = std::getenv("SOURCE_DATE_EPOCH"); e && *e) {
    char* end = nullptr;
    const long long v = std::strtoll(e, &end, 10);
    if (end && *end == '\0') return v;
    throw TemplateError(fmt::format("SOURCE_DATE_EPOCH: expected seconds since the epoch, got '{}'", e));
  }
  return static_cast<int64_t>(std::time(nullptr));
}

std::string strftime_utc(const std::string& format, int64_t seconds) {
  const auto t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::string out(256 + format.size() * 8, '\0');
  // The format is the template's, as Python's strftime takes it.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
  const size_t n = std::strftime(out.data(), out.size(), format.c_str(), &tm);
#pragma GCC diagnostic pop
  if (n == 0 && !format.empty()) throw TemplateError("strftime_now(): format too long");
  out.resize(n);
  return out;
}

Value range(CallArgs& a) {
  int64_t start = 0, stop = 0, step = 1;
  for (const auto& v : a.pos)
    if (!v.is_int() && !v.is_bool())
      throw TemplateError(fmt::format("range() expects integers, got '{}'", type_name(v)));
  if (a.pos.size() == 1) stop = a.pos[0].as_int();
  else if (a.pos.size() >= 2) {
    start = a.pos[0].as_int();
    stop = a.pos[1].as_int();
    if (a.pos.size() >= 3) step = a.pos[2].as_int();
  } else {
    throw TemplateError("range expected at least 1 argument, got 0");
  }
  if (step == 0) throw TemplateError("range() arg 3 must not be zero");
  Array out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (out.size() >= 1'000'000) throw TemplateError("range() too large (more than 1000000 items)");
    out.emplace_back(i);
  }
  return Value::array(std::move(out));
}

}  // namespace

std::string Template::render(const nlohmann::ordered_json& context) const {
  auto globals = std::make_shared<Scope>();
  const Options& opt = impl_->opt;
  globals->set("raise_exception", Value::function("raise_exception", [](CallArgs& a) -> Value {
    throw RaisedException(a.pos.empty() ? "" : to_str(a.pos[0]));
  }));
  globals->set("strftime_now", Value::function("strftime_now", [&opt](CallArgs& a) -> Value {
    if (a.pos.empty() || !a.pos[0].is_string()) throw TemplateError("strftime_now() expects a format string");
    return strftime_utc(a.pos[0].str(), now_seconds(opt));
  }));
  globals->set("range", Value::function("range", range));
  const auto make_dict = [](CallArgs& a, bool is_namespace) {
    Value d = Value::object({}, is_namespace);
    if (!a.pos.empty() && a.pos[0].is_object())
      for (const auto& kv : a.pos[0].obj()) d.obj().push_back(kv);
    for (const auto& [k, v] : a.kw) {
      if (Value* old = find_key(d, k)) *old = v;
      else d.obj().emplace_back(Value(k), v);
    }
    return d;
  };
  globals->set("namespace", Value::function("namespace", [make_dict](CallArgs& a) { return make_dict(a, true); }));
  globals->set("dict", Value::function("dict", [make_dict](CallArgs& a) { return make_dict(a, false); }));
  if (!context.is_object() && !context.is_null())
    throw TemplateError(fmt::format("render: the context must be a JSON object, got {}", context.type_name()));
  if (context.is_object())
    for (const auto& [k, v] : context.items()) globals->set(k, from_json(v));
  Evaluator ev(opt, globals);
  return ev.render(impl_->body);
}

}  // namespace llmctl::jinja
