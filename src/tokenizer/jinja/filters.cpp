// Jinja's built-in filters and tests (jinja2/filters.py, jinja2/tests.py) that chat templates
// use, with Hugging Face's tojson (json.dumps, ensure_ascii=False, keys in given order).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "tokenizer/chat_template.h"
#include "tokenizer/jinja/evaluator.h"

namespace llmctl::jinja {

namespace {

Value attribute_of(const Value& item, const std::string& path) {  // "a.b" or "0"
  Value v = item;
  size_t pos = 0;
  while (true) {
    const size_t dot = path.find('.', pos);
    const std::string part = path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    if (!part.empty() && part.size() < 19 && std::all_of(part.begin(), part.end(), ::isdigit))
      v = get_item(v, Value(static_cast<int64_t>(std::strtoll(part.c_str(), nullptr, 10))));
    else
      v = get_item(v, Value(part));
    if (dot == std::string::npos) return v;
    pos = dot + 1;
  }
}

// map, select, reject, unique and reverse return Python generators or iterators.
Value generator(Array items) {
  Value g = Value::array(std::move(items));
  std::get<ArrayRef>(g.v).generator = true;
  return g;
}

CallArgs rest(const CallArgs& a, size_t from) {
  CallArgs r;
  for (size_t i = from; i < a.pos.size(); ++i) r.pos.push_back(a.pos[i]);
  r.kw = a.kw;
  return r;
}

std::string lower_ascii(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

Value Evaluator::apply_filter(const std::string& name, const Value& in, CallArgs& a) {
  const auto need_str = [&]() -> std::string { return to_str(in); };
  const auto as_string = [&]() { return in.is_string() ? in : Value(to_str(in)); };
  if (name == "safe") return in.markup ? in : make_markup(need_str());
  if (name == "string") return as_string();
  if (name == "trim") return get_method(as_string(), "strip").callable().fn->operator()(a);
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
    CallArgs none;
    return get_method(as_string(), name).callable().fn->operator()(none);
  }
  if (name == "length" || name == "count") {
    const int64_t n = length(in);
    if (n < 0) throw TemplateError(fmt::format("object of type '{}' has no len()", type_name(in)));
    return n;
  }
  if (name == "default" || name == "d") {
    const Value* def = a.get(0, "default_value");
    const Value* boolean = a.get(1, "boolean");
    const bool use = in.is_undefined() || (boolean && truthy(*boolean) && !truthy(in));
    return use ? (def ? *def : Value("")) : in;
  }
  if (name == "tojson") {
    const Value* indent = a.get(0, "indent");
    const Value* seps = a.get(2, "separators");
    const int ind = indent && !indent->is_none() ? static_cast<int>(indent->as_int()) : -1;
    std::string item_sep = ind >= 0 ? "," : ", ", key_sep = ": ";
    if (seps && seps->is_array() && seps->arr().size() == 2) {
      item_sep = to_str(seps->arr()[0]);
      key_sep = to_str(seps->arr()[1]);
    }
    return to_json(in, ind, item_sep, key_sep);
  }
  if (name == "join") {
    const Value* d = a.get(0, "d");
    const Value* attr = a.get(1, "attribute");
    std::string out;
    bool first = true;
    for (const auto& x : iterate(in)) {
      if (!first) out += d ? to_str(*d) : "";
      first = false;
      out += to_str(attr ? attribute_of(x, to_str(*attr)) : x);
    }
    return out;
  }
  if (name == "first" || name == "last") {
    const Array items = iterate(in);
    if (items.empty()) return Value::undefined(fmt::format("No {} item, sequence was empty.", name));
    return name == "first" ? items.front() : items.back();
  }
  if (name == "list") return Value::array(iterate(in));
  if (name == "items") {
    if (in.is_undefined()) return Value::array();
    if (!in.is_object()) throw TemplateError(fmt::format("can only get item pairs from a mapping, not '{}'", type_name(in)));
    Array out;
    for (const auto& [k, v] : in.obj()) out.push_back(Value::array({k, v}, true));
    return Value::array(std::move(out));
  }
  if (name == "dictsort") {
    if (!in.is_object()) throw TemplateError("dictsort: expected a mapping");
    Array out;
    for (const auto& [k, v] : in.obj()) out.push_back(Value::array({k, v}, true));
    const Value* by = a.get(1, "by");
    const size_t idx = by && to_str(*by) == "value" ? 1 : 0;
    std::stable_sort(out.begin(), out.end(), [idx](const Value& x, const Value& y) {
      const Value &p = x.arr()[idx], &q = y.arr()[idx];
      if (p.is_string() && q.is_string()) return lower_ascii(p.str()) < lower_ascii(q.str());
      return compare(p, q) < 0;
    });
    return Value::array(std::move(out));
  }
  if (name == "replace") {
    CallArgs m;
    m.pos = a.pos;
    return get_method(as_string(), "replace").callable().fn->operator()(m);
  }
  if (name == "int") {
    const Value* def = a.get(0, "default");
    const Value fallback = def ? *def : Value(int64_t{0});
    if (in.is_number()) return in.is_float() ? Value(static_cast<int64_t>(in.as_double())) : Value(in.as_int());
    if (in.is_string()) {
      const std::string s(python_strip(in.str()));
      char* end = nullptr;
      const long long v = std::strtoll(s.c_str(), &end, 10);
      if (!s.empty() && end && *end == '\0') return static_cast<int64_t>(v);
      const double d = std::strtod(s.c_str(), &end);
      if (!s.empty() && end && *end == '\0') return static_cast<int64_t>(d);
    }
    return fallback;
  }
  if (name == "float") {
    if (in.is_number()) return in.as_double();
    if (in.is_string()) {
      char* end = nullptr;
      const std::string s(python_strip(in.str()));
      const double d = std::strtod(s.c_str(), &end);
      if (!s.empty() && end && *end == '\0') return d;
    }
    const Value* def = a.get(0, "default");
    return def ? *def : Value(0.0);
  }
  if (name == "round") {
    const Value* p = a.get(0, "precision");
    const Value* method = a.get(1, "method");
    const double scale = std::pow(10.0, p ? p->as_double() : 0.0);
    const std::string m = method ? to_str(*method) : "common";
    const double x = in.as_double() * scale;
    const double r = m == "floor" ? std::floor(x) : m == "ceil" ? std::ceil(x) : std::round(x);
    return r / scale;
  }
  if (name == "abs") {
    if (in.is_float()) return std::fabs(in.as_double());
    return in.as_int() < 0 ? -in.as_int() : in.as_int();
  }
  if (name == "escape" || name == "e") return in.markup ? in : make_markup(html_escape(need_str()));
  if (name == "reverse") {
    if (in.is_string()) {
      auto cps = code_points(in.str());
      std::string out;
      for (auto it = cps.rbegin(); it != cps.rend(); ++it) out += *it;
      return out;
    }
    Array items = iterate(in);
    std::reverse(items.begin(), items.end());
    return generator(std::move(items));
  }
  if (name == "sort") {
    Array items = iterate(in);
    const Value* rev = a.get(0, "reverse");
    const Value* cs = a.get(1, "case_sensitive");
    const Value* attr = a.get(2, "attribute");
    const bool case_sensitive = cs && truthy(*cs);
    const auto key = [&](const Value& x) {
      Value k = attr ? attribute_of(x, to_str(*attr)) : x;
      if (!case_sensitive && k.is_string()) k = lower_ascii(k.str());
      return k;
    };
    std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
      return compare(key(x), key(y)) < 0;
    });
    if (rev && truthy(*rev)) std::reverse(items.begin(), items.end());
    return Value::array(std::move(items));
  }
  if (name == "unique") {
    Array out;
    for (const auto& x : iterate(in)) {
      bool seen = false;
      for (const auto& y : out) seen = seen || equal(x, y);
      if (!seen) out.push_back(x);
    }
    return generator(std::move(out));
  }
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    const bool attr = name.size() > 6;
    const bool keep = name[0] == 's';
    const std::string attr_name = attr && !a.pos.empty() ? to_str(a.pos[0]) : "";
    const size_t test_at = attr ? 1 : 0;
    const std::string test = test_at < a.pos.size() ? to_str(a.pos[test_at]) : "";
    CallArgs targs = rest(a, test_at + 1);
    Array out;
    if (!truthy(in)) return generator({});  // Jinja's "if value:" before iterating
    for (const auto& x : iterate(in)) {
      const Value v = attr ? attribute_of(x, attr_name) : x;
      const bool ok = test.empty() ? truthy(v) : apply_test(test, v, targs);
      if (ok == keep) out.push_back(x);
    }
    return generator(std::move(out));
  }
  if (name == "map") {
    Array out;
    const Value* attr = nullptr;
    for (const auto& [k, v] : a.kw)
      if (k == "attribute") attr = &v;
    const Value* def = nullptr;
    for (const auto& [k, v] : a.kw)
      if (k == "default") def = &v;
    if (!truthy(in)) return generator({});
    for (const auto& x : iterate(in)) {
      if (attr) {
        Value v = attribute_of(x, to_str(*attr));
        out.push_back(v.is_undefined() && def ? *def : v);
      } else {
        if (a.pos.empty()) throw TemplateError("map requires a filter argument");
        CallArgs fargs = rest(a, 1);
        out.push_back(apply_filter(to_str(a.pos[0]), x, fargs));
      }
    }
    return generator(std::move(out));
  }
  if (name == "batch") {
    const Value* n = a.get(0, "linecount");
    const int64_t size = n ? n->as_int() : 1;
    if (size <= 0) throw TemplateError("batch size must be positive");
    Array out, cur;
    for (const auto& x : iterate(in)) {
      cur.push_back(x);
      if (static_cast<int64_t>(cur.size()) == size) { out.push_back(Value::array(std::move(cur))); cur.clear(); }
    }
    if (!cur.empty()) {
      if (const Value* fill = a.get(1, "fill_with"); fill && !fill->is_none())
        while (static_cast<int64_t>(cur.size()) < size) cur.push_back(*fill);
      out.push_back(Value::array(std::move(cur)));
    }
    return Value::array(std::move(out));
  }
  if (name == "wordcount") {
    CallArgs none;
    return length(get_method(Value(need_str()), "split").callable().fn->operator()(none));
  }
  if (name == "indent") {
    const Value* w = a.get(0, "width");
    const Value* first = a.get(1, "first");
    const Value* blank = a.get(2, "blank");
    const std::string pad = w && w->is_string() ? w->str() : std::string(static_cast<size_t>(w ? w->as_int() : 4), ' ');
    const std::string s = need_str();
    std::string out;
    size_t pos = 0;
    bool first_line = true;
    while (true) {
      const size_t nl = s.find('\n', pos);
      const std::string line = s.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
      const bool indent_it = first_line ? (first && truthy(*first)) : (!line.empty() || (blank && truthy(*blank)));
      out += (indent_it ? pad : "") + line;
      if (nl == std::string::npos) break;
      out += '\n';
      pos = nl + 1;
      first_line = false;
    }
    return out;
  }
  if (name == "center") {
    const Value* w = a.get(0, "width");
    const std::string s = need_str();
    const int64_t width = w ? w->as_int() : 80, n = length(Value(s));
    if (n >= width) return s;
    const int64_t total = width - n, left = total / 2 + (total & width & 1);
    return std::string(static_cast<size_t>(left), ' ') + s + std::string(static_cast<size_t>(total - left), ' ');
  }
  if (name == "min" || name == "max" || name == "sum") {
    const Array items = iterate(in);
    if (name == "sum") {
      Value total = a.get(1, "start") ? *a.get(1, "start") : Value(int64_t{0});
      for (const auto& x : items) total = arithmetic("+", total, x);
      return total;
    }
    if (items.empty()) return Value::undefined(fmt::format("No {} item, sequence was empty.", name));
    Value best = items[0];
    for (const auto& x : items)
      if ((name == "min") == (compare(x, best) < 0) && !equal(x, best)) best = x;
    return best;
  }
  throw TemplateError(fmt::format("No filter named '{}'.", name));
}

bool Evaluator::apply_test(const std::string& name, const Value& v, CallArgs& a) {
  const Value* arg = a.get(0, "other");
  const auto need_arg = [&]() -> const Value& {
    if (!arg) throw TemplateError(fmt::format("test '{}' needs an argument", name));
    return *arg;
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_object() && !std::get<ObjectRef>(v.v).is_namespace;
  if (name == "iterable") return v.is_string() || v.is_array() || v.is_object() || v.is_undefined();
  if (name == "sequence") return v.is_string() || v.is_array() || v.is_object() || v.is_undefined();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && std::get<bool>(v.v);
  if (name == "false") return v.is_bool() && !std::get<bool>(v.v);
  if (name == "callable") return v.is_callable();
  if (name == "odd" || name == "even") {
    if (!v.is_number()) throw TemplateError(fmt::format("'{}' is not a number", type_name(v)));
    return (v.as_int() % 2 != 0) == (name == "odd");
  }
  if (name == "divisibleby") {
    const int64_t d = need_arg().as_int();
    if (d == 0) throw TemplateError("integer modulo by zero");
    return v.as_int() % d == 0;
  }
  if (name == "equalto" || name == "eq" || name == "==" || name == "sameas") return equal(v, need_arg());
  if (name == "ne" || name == "!=") return !equal(v, need_arg());
  if (name == "lt" || name == "lessthan") return compare(v, need_arg()) < 0;
  if (name == "le") return compare(v, need_arg()) <= 0;
  if (name == "gt" || name == "greaterthan") return compare(v, need_arg()) > 0;
  if (name == "ge") return compare(v, need_arg()) >= 0;
  if (name == "in") {
    const Value& c = need_arg();
    if (c.is_string()) return v.is_string() && c.str().find(v.str()) != std::string::npos;
    if (c.is_object()) return find_item(c, v) != nullptr;
    for (const auto& x : iterate(c))
      if (equal(x, v)) return true;
    return false;
  }
  if (name == "lower" || name == "upper") {
    if (!v.is_string()) return false;
    CallArgs none;
    return equal(get_method(v, name).callable().fn->operator()(none), v);
  }
  if (name == "escaped") return false;
  throw TemplateError(fmt::format("No test named '{}'.", name));
}

}  // namespace llmctl::jinja
