// Python semantics of the template values: printing, truthiness, comparison, JSON.
#include "tokenizer/jinja/value.h"

#include <fmt/format.h>

#include <cmath>

#include "tokenizer/jinja/jinja.h"
#include "tokenizer/utf8.h"

namespace llmctl::jinja {

int64_t Value::as_int() const {
  if (is_bool()) return std::get<bool>(v) ? 1 : 0;
  if (is_int()) return std::get<int64_t>(v);
  if (is_float()) return static_cast<int64_t>(std::get<double>(v));
  if (is_undefined()) throw TemplateError(undefined_reason());
  throw TemplateError(fmt::format("expected a number, got '{}'", type_name(*this)));
}

double Value::as_double() const {
  if (is_float()) return std::get<double>(v);
  return static_cast<double>(as_int());
}

const Value* CallArgs::get(size_t i, std::string_view name) const {
  for (const auto& [k, val] : kw)
    if (k == name) return &val;
  return i < pos.size() ? &pos[i] : nullptr;
}

std::string type_name(const Value& v) {
  switch (v.v.index()) {
    case 0: return "Undefined";
    case 1: return "NoneType";
    case 2: return "bool";
    case 3: return "int";
    case 4: return "float";
    case 5: return "str";
    case 6: return is_generator(v) ? "generator" : std::get<ArrayRef>(v.v).tuple ? "tuple" : "list";
    case 7: return std::get<ObjectRef>(v.v).is_namespace ? "Namespace" : "dict";
    default: return "function";
  }
}

bool truthy(const Value& v) {
  switch (v.v.index()) {
    case 0: case 1: return false;
    case 2: return std::get<bool>(v.v);
    case 3: return std::get<int64_t>(v.v) != 0;
    case 4: return std::get<double>(v.v) != 0.0;
    case 5: return !v.str().empty();
    case 6: return is_generator(v) || !v.arr().empty();
    case 7: return std::get<ObjectRef>(v.v).is_namespace || !v.obj().empty();
    default: return true;
  }
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  // Python's repr: the shortest round-tripping digits, exponent form outside [1e-4, 1e16).
  std::string s = fmt::format("{}", d);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

static std::string repr_string(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\\') out += "\\\\";
    else if (c == static_cast<unsigned char>(quote)) { out += '\\'; out += static_cast<char>(c); }
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) out += fmt::format("\\x{:02x}", c);
    else out += static_cast<char>(c);
  }
  out += quote;
  return out;
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

Value make_markup(std::string s) {
  Value v(std::move(s));
  v.markup = true;
  return v;
}

bool is_generator(const Value& v) { return v.is_array() && std::get<ArrayRef>(v.v).generator; }

std::string repr(const Value& v) {
  if (v.is_string()) return repr_string(v.str());
  if (is_generator(v)) return "<generator object at 0x7f0000000000>";
  if (v.is_array()) {
    const bool tuple = std::get<ArrayRef>(v.v).tuple;
    std::string out = tuple ? "(" : "[";
    const Array& a = v.arr();
    for (size_t i = 0; i < a.size(); ++i) out += (i ? ", " : "") + repr(a[i]);
    if (tuple && a.size() == 1) out += ",";
    return out + (tuple ? ")" : "]");
  }
  if (v.is_object()) {
    if (std::get<ObjectRef>(v.v).is_namespace) return "<Namespace>";
    std::string out = "{";
    bool first = true;
    for (const auto& [k, val] : v.obj()) {
      out += (first ? "" : ", ") + repr(k) + ": " + repr(val);
      first = false;
    }
    return out + "}";
  }
  return to_str(v);
}

std::string to_str(const Value& v) {
  switch (v.v.index()) {
    case 0: return "";
    case 1: return "None";
    case 2: return std::get<bool>(v.v) ? "True" : "False";
    case 3: return std::to_string(std::get<int64_t>(v.v));
    case 4: return float_repr(std::get<double>(v.v));
    case 5: return v.str();
    case 8: return "<function " + v.callable().name + ">";
    default: return repr(v);
  }
}

bool equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.v.index() != b.v.index()) return false;
  switch (a.v.index()) {
    case 0: case 1: return true;
    case 5: return a.str() == b.str();
    case 6: {
      const Array &x = a.arr(), &y = b.arr();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!equal(x[i], y[i])) return false;
      return true;
    }
    case 7: {
      if (&a.obj() == &b.obj()) return true;
      if (a.obj().size() != b.obj().size()) return false;
      for (const auto& [k, val] : a.obj()) {
        const Value* o = find_item(b, k);
        if (!o || !equal(val, *o)) return false;
      }
      return true;
    }
    case 8: return a.callable().fn == b.callable().fn;
    default: return false;
  }
}

int compare(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      const double x = a.as_double(), y = b.as_double();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    const int64_t x = a.as_int(), y = b.as_int();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.str().compare(b.str());  // UTF-8 byte order is code point order
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_array() && b.is_array()) {
    const Array &x = a.arr(), &y = b.arr();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i)
      if (int c = compare(x[i], y[i])) return c;
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  throw TemplateError(fmt::format("'<' not supported between instances of '{}' and '{}'",
                                  type_name(a), type_name(b)));
}

Value* find_key(const Value& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  for (auto& [k, val] : obj.obj())
    if (k.is_string() && k.str() == key) return &val;
  return nullptr;
}

Value* find_item(const Value& obj, const Value& key) {
  if (!obj.is_object()) return nullptr;
  for (auto& [k, val] : obj.obj())
    if (equal(k, key)) return &val;
  return nullptr;
}

std::vector<std::string> code_points(std::string_view s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    size_t n = utf8_valid_char_len(s, i);
    if (n == 0) n = 1;
    out.emplace_back(s.substr(i, n));
    i += n;
  }
  return out;
}

int64_t length(const Value& v) {
  if (v.is_string()) return static_cast<int64_t>(code_points(v.str()).size());
  if (v.is_array()) return is_generator(v) ? -1 : static_cast<int64_t>(v.arr().size());
  if (v.is_object()) return static_cast<int64_t>(v.obj().size());
  if (v.is_undefined()) return 0;
  return -1;
}

Array iterate(const Value& v) {
  if (v.is_array()) return v.arr();
  if (v.is_undefined()) return {};
  if (v.is_object() && !std::get<ObjectRef>(v.v).is_namespace) {
    Array keys;
    for (const auto& kv : v.obj()) keys.emplace_back(kv.first);
    return keys;
  }
  if (v.is_string()) {
    Array chars;
    for (auto& c : code_points(v.str())) chars.emplace_back(std::move(c));
    return chars;
  }
  throw TemplateError(fmt::format("'{}' object is not iterable", type_name(v)));
}

Value from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return None{};
    case nlohmann::ordered_json::value_t::boolean: return j.get<bool>();
    case nlohmann::ordered_json::value_t::number_integer: return j.get<int64_t>();
    case nlohmann::ordered_json::value_t::number_unsigned:
      return static_cast<int64_t>(j.get<uint64_t>());
    case nlohmann::ordered_json::value_t::number_float: return j.get<double>();
    case nlohmann::ordered_json::value_t::string: return j.get<std::string>();
    case nlohmann::ordered_json::value_t::array: {
      Array a;
      for (const auto& e : j) a.push_back(from_json(e));
      return Value::array(std::move(a));
    }
    case nlohmann::ordered_json::value_t::object: {
      Object o;
      for (const auto& [k, e] : j.items()) o.emplace_back(Value(k), from_json(e));
      return Value::object(std::move(o));
    }
    default: return Value::undefined("unsupported JSON value");
  }
}

static std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20 || c == 0x7f) out += fmt::format("\\u{:04x}", c);
        else out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

static void json_into(std::string& out, const Value& v, int indent, int depth,
                      const std::string& item_sep, const std::string& key_sep) {
  const auto newline = [&](int d) {
    if (indent >= 0) out += "\n" + std::string(static_cast<size_t>(indent * d), ' ');
  };
  switch (v.v.index()) {
    case 1: out += "null"; return;
    case 2: out += std::get<bool>(v.v) ? "true" : "false"; return;
    case 3: out += std::to_string(std::get<int64_t>(v.v)); return;
    case 4: {
      const double d = std::get<double>(v.v);
      out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity") : float_repr(d);
      return;
    }
    case 5: out += json_string(v.str()); return;
    case 6: {
      if (is_generator(v)) break;
      const Array& a = v.arr();
      if (a.empty()) { out += "[]"; return; }
      out += "[";
      for (size_t i = 0; i < a.size(); ++i) {
        if (i) out += item_sep;
        newline(depth + 1);
        json_into(out, a[i], indent, depth + 1, item_sep, key_sep);
      }
      newline(depth);
      out += "]";
      return;
    }
    case 7: {
      if (!std::get<ObjectRef>(v.v).is_namespace) {
        const Object& o = v.obj();
        if (o.empty()) { out += "{}"; return; }
        out += "{";
        bool first = true;
        for (const auto& [k, val] : o) {
          if (!first) out += item_sep;
          first = false;
          newline(depth + 1);
          if (!k.is_string() && !k.is_number() && !k.is_none())
            throw TemplateError(fmt::format("keys must be str, int, float, bool or None, not {}", type_name(k)));
          out += json_string(k.is_bool() ? (std::get<bool>(k.v) ? "true" : "false")
                             : k.is_none() ? "null" : to_str(k)) + key_sep;
          json_into(out, val, indent, depth + 1, item_sep, key_sep);
        }
        newline(depth);
        out += "}";
        return;
      }
      break;
    }
    default: break;
  }
  throw TemplateError(fmt::format("Object of type {} is not JSON serializable", type_name(v)));
}

std::string to_json(const Value& v, int indent, const std::string& item_sep,
                    const std::string& key_sep) {
  std::string out;
  json_into(out, v, indent, 0, item_sep, key_sep);
  return out;
}

}  // namespace llmctl::jinja
