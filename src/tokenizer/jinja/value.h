#pragma once
// The values a template computes with: Python's types as Jinja sees them. Lists, dicts and
// namespaces are shared (reference semantics, as in Python), everything else is by value.

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace llmctl::jinja {

struct Value;
struct CallArgs;
using Array = std::vector<Value>;
using Object = std::vector<std::pair<Value, Value>>;  // insertion order, as Python dicts
using Function = std::function<Value(CallArgs&)>;

// An undefined value remembers why it is undefined ("'x' is undefined"), for the error an
// operation on it raises, as Jinja's default Undefined does.
struct Undefined {
  std::string reason;
};
struct None {};
struct ArrayRef {
  std::shared_ptr<Array> items;
  bool tuple = false;      // prints as (a, b)
  bool generator = false;  // what map/select/reject return: no len(), not JSON, always true
};
struct ObjectRef {
  std::shared_ptr<Object> items;
  bool is_namespace = false;  // namespace(): attributes assignable with {% set ns.x = ... %}
};
struct Callable {
  std::shared_ptr<Function> fn;
  std::string name;
};

struct Value {
  std::variant<Undefined, None, bool, int64_t, double, std::string, ArrayRef, ObjectRef, Callable> v;
  // A string that is Markup (|safe, |escape): `+` HTML-escapes the plain string it meets, and
  // its string methods return Markup, as markupsafe does even with autoescape off.
  bool markup = false;

  Value() : v(Undefined{}) {}
  Value(None n) : v(n) {}
  Value(bool b) : v(b) {}
  Value(int64_t i) : v(i) {}
  Value(int i) : v(int64_t{i}) {}
  Value(double d) : v(d) {}
  Value(std::string s) : v(std::move(s)) {}
  Value(const char* s) : v(std::string(s)) {}
  Value(ArrayRef a) : v(std::move(a)) {}
  Value(ObjectRef o) : v(std::move(o)) {}
  Value(Callable c) : v(std::move(c)) {}
  static Value undefined(std::string reason) { Value r; r.v = Undefined{std::move(reason)}; return r; }
  static Value array(Array a = {}, bool tuple = false) {
    return ArrayRef{std::make_shared<Array>(std::move(a)), tuple};
  }
  static Value object(Object o = {}, bool is_namespace = false) {
    return ObjectRef{std::make_shared<Object>(std::move(o)), is_namespace};
  }
  static Value function(std::string name, Function f) {
    return Callable{std::make_shared<Function>(std::move(f)), std::move(name)};
  }

  bool is_undefined() const { return std::holds_alternative<Undefined>(v); }
  bool is_none() const { return std::holds_alternative<None>(v); }
  bool is_bool() const { return std::holds_alternative<bool>(v); }
  bool is_int() const { return std::holds_alternative<int64_t>(v); }
  bool is_float() const { return std::holds_alternative<double>(v); }
  bool is_number() const { return is_int() || is_float() || is_bool(); }  // Python: bool is int
  bool is_string() const { return std::holds_alternative<std::string>(v); }
  bool is_array() const { return std::holds_alternative<ArrayRef>(v); }
  bool is_object() const { return std::holds_alternative<ObjectRef>(v); }
  bool is_callable() const { return std::holds_alternative<Callable>(v); }

  const std::string& str() const { return std::get<std::string>(v); }
  Array& arr() const { return *std::get<ArrayRef>(v).items; }
  Object& obj() const { return *std::get<ObjectRef>(v).items; }
  const Callable& callable() const { return std::get<Callable>(v); }
  const std::string& undefined_reason() const { return std::get<Undefined>(v).reason; }
  int64_t as_int() const;     // bool, int or float (truncated); throws TemplateError otherwise
  double as_double() const;   // bool, int or float; throws TemplateError otherwise
};

struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  // Positional index `i` or keyword `name`; nullptr when absent.
  const Value* get(size_t i, std::string_view name) const;
};

std::string html_escape(const std::string& s);
Value make_markup(std::string s);

// Python's type name as Jinja's messages say it: "str", "int", "list", "dict", ...
std::string type_name(const Value& v);
bool truthy(const Value& v);
// Python's str() and repr(): True, None, 1.0, ['a', 'b'], {'k': 1}.
std::string to_str(const Value& v);
std::string repr(const Value& v);
std::string float_repr(double d);
bool equal(const Value& a, const Value& b);
// -1, 0, 1 as Python's < would order them; throws Error for unorderable types.
int compare(const Value& a, const Value& b);
// A lookup in a dict or namespace; nullptr when absent.
Value* find_key(const Value& obj, std::string_view key);
Value* find_item(const Value& obj, const Value& key);  // any key type, by ==
bool is_generator(const Value& v);
// Python's len(); -1 when the value has none.
int64_t length(const Value& v);
// The items a for loop visits: list items, dict keys, string characters; throws otherwise.
Array iterate(const Value& v);

Value from_json(const nlohmann::ordered_json& j);
// json.dumps(x, ensure_ascii=False, indent=indent, separators=...): indent < 0 means None.
std::string to_json(const Value& v, int indent, const std::string& item_sep,
                    const std::string& key_sep);

// Code points of UTF-8 text (invalid bytes count as one each), as Python's str sees them.
std::vector<std::string> code_points(std::string_view s);

}  // namespace llmctl::jinja
