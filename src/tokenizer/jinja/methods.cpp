// Attribute and item lookup, Python's str/dict/list methods, and the arithmetic operators.
#include <fmt/format.h>

#include <cmath>

#include "tokenizer/chat_template.h"
#include "tokenizer/jinja/evaluator.h"

namespace llmctl::jinja {

namespace {

std::string arg_str(const CallArgs& a, size_t i, const char* name, const char* method) {
  const Value* v = a.get(i, name);
  if (!v || !v->is_string())
    throw TemplateError(fmt::format("{}() expects a string argument '{}'", method, name));
  return v->str();
}

bool is_ws(const std::string& cp) {
  return python_strip(cp).empty();
}

// Python's str.strip/lstrip/rstrip: Unicode whitespace, or the code points of `chars`.
std::string strip(const std::string& s, const Value* chars, bool left, bool right) {
  const auto cps = code_points(s);
  std::vector<std::string> set;
  const bool by_chars = chars && !chars->is_none();
  if (by_chars) set = code_points(chars->str());
  const auto strippable = [&](const std::string& c) {
    if (!by_chars) return is_ws(c);
    for (const auto& x : set)
      if (x == c) return true;
    return false;
  };
  size_t lo = 0, hi = cps.size();
  if (left) while (lo < hi && strippable(cps[lo])) ++lo;
  if (right) while (hi > lo && strippable(cps[hi - 1])) --hi;
  std::string out;
  for (size_t i = lo; i < hi; ++i) out += cps[i];
  return out;
}

Value split(const std::string& s, const Value* sep, int64_t maxsplit) {
  Array out;
  if (!sep || sep->is_none()) {  // runs of whitespace, no empty pieces
    const auto cps = code_points(s);
    std::string cur;
    bool in_word = false;
    int64_t splits = 0;
    for (size_t i = 0; i < cps.size(); ++i) {
      if (is_ws(cps[i]) && (maxsplit < 0 || splits < maxsplit || !in_word)) {
        if (in_word) { out.emplace_back(cur); cur.clear(); in_word = false; ++splits; }
        continue;
      }
      if (!in_word && maxsplit >= 0 && splits >= maxsplit) {
        for (size_t j = i; j < cps.size(); ++j) cur += cps[j];
        cur = strip(cur, nullptr, false, true);
        out.emplace_back(cur);
        return Value::array(std::move(out));
      }
      in_word = true;
      cur += cps[i];
    }
    if (in_word) out.emplace_back(cur);
    return Value::array(std::move(out));
  }
  const std::string& d = sep->str();
  if (d.empty()) throw TemplateError("empty separator");
  size_t pos = 0;
  int64_t splits = 0;
  while (maxsplit < 0 || splits < maxsplit) {
    const size_t f = s.find(d, pos);
    if (f == std::string::npos) break;
    out.emplace_back(s.substr(pos, f - pos));
    pos = f + d.size();
    ++splits;
  }
  out.emplace_back(s.substr(pos));
  return Value::array(std::move(out));
}

std::string replace(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  std::string out;
  size_t pos = 0;
  int64_t done = 0;
  if (from.empty()) {
    const auto cps = code_points(s);
    for (const auto& c : cps) {
      if (count < 0 || done < count) { out += to; ++done; }
      out += c;
    }
    if (count < 0 || done < count) out += to;
    return out;
  }
  while (count < 0 || done < count) {
    const size_t f = s.find(from, pos);
    if (f == std::string::npos) break;
    out += s.substr(pos, f - pos) + to;
    pos = f + from.size();
    ++done;
  }
  return out + s.substr(pos);
}

bool affix(const std::string& s, const Value& p, bool prefix) {
  const auto one = [&](const std::string& a) {
    return a.size() <= s.size() && (prefix ? s.compare(0, a.size(), a) == 0
                                           : s.compare(s.size() - a.size(), a.size(), a) == 0);
  };
  if (p.is_string()) return one(p.str());
  if (p.is_array()) {
    for (const auto& x : p.arr())
      if (x.is_string() && one(x.str())) return true;
    return false;
  }
  throw TemplateError(fmt::format("{}with first arg must be str or a tuple of str, not {}",
                                  prefix ? "starts" : "ends", type_name(p)));
}

std::string case_map(const std::string& s, int mode) {  // 0 lower, 1 upper, 2 title, 3 capitalize
  std::string out = s;
  bool word_start = true;
  for (size_t i = 0; i < out.size(); ++i) {
    auto c = static_cast<unsigned char>(out[i]);
    const bool alpha = std::isalpha(c) != 0;
    bool up = mode == 1 || (mode == 2 && word_start) || (mode == 3 && i == 0);
    if (c < 0x80) out[i] = static_cast<char>(up ? std::toupper(c) : std::tolower(c));
    if (mode == 2) word_start = !alpha && c < 0x80;
  }
  return out;
}

// "{} {0} {name}".format(...), with str() of each argument.
std::string format(const std::string& f, const CallArgs& a) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] == '{' && i + 1 < f.size() && f[i + 1] == '{') { out += '{'; ++i; continue; }
    if (f[i] == '}' && i + 1 < f.size() && f[i + 1] == '}') { out += '}'; ++i; continue; }
    if (f[i] != '{') { out += f[i]; continue; }
    const size_t end = f.find('}', i);
    if (end == std::string::npos) throw TemplateError("Single '{' encountered in format string");
    std::string field = f.substr(i + 1, end - i - 1);
    const size_t colon = field.find(':');
    if (colon != std::string::npos) field.resize(colon);
    const Value* v = nullptr;
    if (field.empty()) v = auto_index < a.pos.size() ? &a.pos[auto_index++] : nullptr;
    else if (std::isdigit(static_cast<unsigned char>(field[0]))) {
      size_t k = 0;  // digits past the argument count cannot name one; stop before overflow
      for (size_t j = 0; j < field.size() && k <= a.pos.size(); ++j)
        k = std::isdigit(static_cast<unsigned char>(field[j])) ? k * 10 + static_cast<size_t>(field[j] - '0') : a.pos.size() + 1;
      v = k < a.pos.size() ? &a.pos[k] : nullptr;
    } else {
      for (const auto& [k, x] : a.kw)
        if (k == field) v = &x;
    }
    if (!v) throw TemplateError(fmt::format("Replacement index {} out of range for positional args tuple", field));
    out += to_str(*v);
    i = end;
  }
  return out;
}

Value str_method(const std::string& s, const std::string& name, CallArgs& a) {
  if (name == "strip") return strip(s, a.get(0, "chars"), true, true);
  if (name == "lstrip") return strip(s, a.get(0, "chars"), true, false);
  if (name == "rstrip") return strip(s, a.get(0, "chars"), false, true);
  if (name == "split") {
    const Value* m = a.get(1, "maxsplit");
    return split(s, a.get(0, "sep"), m ? m->as_int() : -1);
  }
  if (name == "startswith" || name == "endswith") {
    const Value* p = a.get(0, "prefix");
    if (!p) throw TemplateError(name + "() takes at least 1 argument (0 given)");
    return affix(s, *p, name == "startswith");
  }
  if (name == "upper") return case_map(s, 1);
  if (name == "lower") return case_map(s, 0);
  if (name == "title") return case_map(s, 2);
  if (name == "capitalize") return case_map(s, 3);
  if (name == "replace") {
    const Value* c = a.get(2, "count");
    return replace(s, arg_str(a, 0, "old", "replace"), arg_str(a, 1, "new", "replace"), c ? c->as_int() : -1);
  }
  if (name == "format") return format(s, a);
  if (name == "find" || name == "rfind" || name == "index" || name == "count") {
    const std::string sub = arg_str(a, 0, "sub", name.c_str());
    if (name == "count") {
      if (sub.empty()) return static_cast<int64_t>(code_points(s).size() + 1);
      int64_t n = 0;
      for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
      return n;
    }
    const size_t p = name == "rfind" ? s.rfind(sub) : s.find(sub);
    if (p == std::string::npos) {
      if (name == "index") throw TemplateError("substring not found");
      return int64_t{-1};
    }
    return static_cast<int64_t>(code_points(s.substr(0, p)).size());
  }
  if (name == "join") {
    std::string out;
    const Value* items = a.get(0, "iterable");
    if (!items) throw TemplateError("join() takes exactly one argument");
    bool first = true;
    for (const auto& x : iterate(*items)) {
      out += (first ? "" : s) + to_str(x);
      first = false;
    }
    return out;
  }
  if (name == "splitlines") {
    Array out;
    size_t pos = 0;
    while (pos < s.size()) {
      const size_t f = s.find('\n', pos);
      if (f == std::string::npos) { out.emplace_back(s.substr(pos)); break; }
      std::string line = s.substr(pos, f - pos);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      out.emplace_back(line);
      pos = f + 1;
    }
    return Value::array(std::move(out));
  }
  const auto all = [&](int (*pred)(int)) {
    if (s.empty()) return false;
    for (const char c : s)
      if (!pred(static_cast<unsigned char>(c))) return false;
    return true;
  };
  if (name == "isdigit" || name == "isnumeric" || name == "isdecimal") return all(std::isdigit);
  if (name == "isalpha") return all(std::isalpha);
  if (name == "isalnum") return all(std::isalnum);
  if (name == "isspace") return !s.empty() && python_strip(s).empty();
  if (name == "islower") return s != case_map(s, 1) && s == case_map(s, 0);
  if (name == "isupper") return s != case_map(s, 0) && s == case_map(s, 1);
  throw TemplateError(fmt::format("'str object' has no attribute '{}'", name));
}

bool is_str_method(const std::string& n) {
  static const char* const names[] = {"strip", "lstrip", "rstrip", "split", "startswith", "endswith",
      "upper", "lower", "title", "capitalize", "replace", "format", "find", "rfind", "index", "count",
      "join", "splitlines", "isdigit", "isnumeric", "isdecimal", "isalpha", "isalnum", "isspace",
      "islower", "isupper"};
  for (const char* x : names)
    if (n == x) return true;
  return false;
}

bool is_unsafe_mutator(const std::string& n) {  // ImmutableSandboxedEnvironment refuses these
  static const char* const names[] = {"append", "extend", "insert", "pop", "remove", "clear", "sort",
      "reverse", "update", "setdefault", "popitem", "add", "discard"};
  for (const char* x : names)
    if (n == x) return true;
  return false;
}

}  // namespace

Value get_method(const Value& obj, const std::string& name) {
  if (obj.is_string() && is_str_method(name)) {
    const std::string s = obj.str();
    const bool markup = obj.markup;
    return Value::function(name, [s, name, markup](CallArgs& a) {
      Value r = str_method(s, name, a);
      r.markup = markup && r.is_string();
      return r;
    });
  }
  const bool dict = obj.is_object() && !std::get<ObjectRef>(obj.v).is_namespace;
  if ((dict || obj.is_array()) && is_unsafe_mutator(name)) {
    const std::string msg = fmt::format("access to attribute '{}' of '{}' object is unsafe.", name, type_name(obj));
    return Value::function(name, [msg](CallArgs&) -> Value { throw TemplateError(msg); });
  }
  if (dict && (name == "items" || name == "keys" || name == "values" || name == "get")) {
    return Value::function(name, [obj, name](CallArgs& a) -> Value {
      if (name == "get") {
        const Value* k = a.get(0, "key");
        if (!k) throw TemplateError("get expected at least 1 argument, got 0");
        if (const Value* v = find_item(obj, *k)) return *v;
        const Value* d = a.get(1, "default");
        return d ? *d : Value(None{});
      }
      Array out;
      for (const auto& [k, v] : obj.obj()) {
        if (name == "items") out.push_back(Value::array({k, v}, true));
        else if (name == "keys") out.emplace_back(k);
        else out.push_back(v);
      }
      return Value::array(std::move(out));
    });
  }
  if (obj.is_array() && (name == "index" || name == "count")) {
    return Value::function(name, [obj, name](CallArgs& a) -> Value {
      const Value* x = a.get(0, "value");
      if (!x) throw TemplateError(name + "() takes exactly one argument");
      int64_t n = 0;
      for (size_t i = 0; i < obj.arr().size(); ++i)
        if (equal(obj.arr()[i], *x)) {
          if (name == "index") return static_cast<int64_t>(i);
          ++n;
        }
      if (name == "index") throw TemplateError(fmt::format("{} is not in list", repr(*x)));
      return n;
    });
  }
  return Value::undefined(fmt::format("'{} object' has no attribute '{}'", type_name(obj), name));
}

Value get_attr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) undefined_error(obj);
  const Value m = get_method(obj, name);
  if (!m.is_undefined()) return m;
  if (const Value* v = find_key(obj, name)) return *v;
  if (obj.is_none()) return Value::undefined(fmt::format("'None' has no attribute '{}'", name));
  return m;
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) undefined_error(obj);
  if (obj.is_object()) {
    if (const Value* v = find_item(obj, key)) return *v;
    if (key.is_string()) {
      const Value m = get_method(obj, key.str());
      if (!m.is_undefined()) return m;
    }
    return Value::undefined(fmt::format("'dict object' has no attribute '{}'", to_str(key)));
  }
  if ((obj.is_array() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    int64_t i = key.as_int();
    if (obj.is_array()) {
      const auto n = static_cast<int64_t>(obj.arr().size());
      if (i < 0) i += n;
      if (i >= 0 && i < n) return obj.arr()[static_cast<size_t>(i)];
    } else {
      const auto cps = code_points(obj.str());
      const auto n = static_cast<int64_t>(cps.size());
      if (i < 0) i += n;
      if (i >= 0 && i < n) return Value(cps[static_cast<size_t>(i)]);
    }
    return Value::undefined(fmt::format("'{} object' has no attribute '{}'", type_name(obj), key.as_int()));
  }
  if (key.is_string()) return get_attr(obj, key.str());
  return Value::undefined(fmt::format("'{} object' has no attribute '{}'", type_name(obj), to_str(key)));
}

static int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

// printf-style "%s %d" % args, as Python's str % does for the common conversions.
static std::string percent_format(const std::string& f, const Value& args) {
  Array items = args.is_array() && std::get<ArrayRef>(args.v).tuple ? args.arr() : Array{args};
  std::string out;
  size_t k = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '%' || i + 1 >= f.size()) { out += f[i]; continue; }
    const char c = f[++i];
    if (c == '%') { out += '%'; continue; }
    if (k >= items.size()) throw TemplateError("not enough arguments for format string");
    const Value& v = items[k++];
    if (c == 's') out += to_str(v);
    else if (c == 'r') out += repr(v);
    else if (c == 'd' || c == 'i') out += std::to_string(v.is_float() ? static_cast<int64_t>(v.as_double()) : v.as_int());
    else throw TemplateError(fmt::format("unsupported format character '{}'", c));
  }
  if (k < items.size()) throw TemplateError("not all arguments converted during string formatting");
  return out;
}

Value arithmetic(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined()) undefined_error(a);
  if (b.is_undefined()) undefined_error(b);
  if (a.is_number() && b.is_number()) {
    const bool fl = a.is_float() || b.is_float();
    if (op == "+") return fl ? Value(a.as_double() + b.as_double()) : Value(a.as_int() + b.as_int());
    if (op == "-") return fl ? Value(a.as_double() - b.as_double()) : Value(a.as_int() - b.as_int());
    if (op == "*") return fl ? Value(a.as_double() * b.as_double()) : Value(a.as_int() * b.as_int());
    if ((op == "/" || op == "//" || op == "%") && b.as_double() == 0.0)
      throw TemplateError(op == "%" ? "integer modulo by zero" : "division by zero");
    if (op == "/") return a.as_double() / b.as_double();
    if (op == "//") return fl ? Value(std::floor(a.as_double() / b.as_double())) : Value(floor_div(a.as_int(), b.as_int()));
    if (op == "%") {
      if (fl) {
        const double r = std::fmod(a.as_double(), b.as_double());
        return (r != 0 && ((r < 0) != (b.as_double() < 0))) ? r + b.as_double() : r;
      }
      return a.as_int() - b.as_int() * floor_div(a.as_int(), b.as_int());
    }
    if (op == "**") {
      if (!fl && b.as_int() >= 0) {  // by squaring; Python's big ints are out of reach
        int64_t r = 1, base = a.as_int();
        for (int64_t e = b.as_int(); e > 0; e >>= 1) {
          if ((e & 1) && __builtin_mul_overflow(r, base, &r)) throw TemplateError("integer overflow in **");
          if (e > 1 && __builtin_mul_overflow(base, base, &base)) throw TemplateError("integer overflow in **");
        }
        return r;
      }
      return std::pow(a.as_double(), b.as_double());
    }
  }
  if (op == "+" && a.is_string() && b.is_string()) {
    if (!a.markup && !b.markup) return a.str() + b.str();
    return make_markup((a.markup ? a.str() : html_escape(a.str())) + (b.markup ? b.str() : html_escape(b.str())));
  }
  if (op == "+" && a.is_array() && b.is_array()) {
    Array r = a.arr();
    r.insert(r.end(), b.arr().begin(), b.arr().end());
    return Value::array(std::move(r));
  }
  if (op == "*" && (a.is_string() || a.is_array()) && (b.is_int() || b.is_bool())) {
    const auto unit = a.is_string() ? a.str().size() : a.arr().size();
    if (b.as_int() > 0 && unit > 0 && static_cast<uint64_t>(b.as_int()) > (64u << 20) / unit)
      throw TemplateError("repetition result exceeds 64 MiB");
    if (a.is_string()) {
      std::string r;
      for (int64_t i = 0; i < b.as_int(); ++i) r += a.str();
      return r;
    }
    Array r;
    for (int64_t i = 0; i < b.as_int(); ++i) r.insert(r.end(), a.arr().begin(), a.arr().end());
    return Value::array(std::move(r));
  }
  if (op == "%" && a.is_string()) return percent_format(a.str(), b);
  throw TemplateError(fmt::format("unsupported operand type(s) for {}: '{}' and '{}'", op, type_name(a), type_name(b)));
}

}  // namespace llmctl::jinja
