// GgufFile: opening (mmap or memory) and typed access to metadata. Parsing is in gguf_reader.cpp.
#include "io/gguf.h"

#include <fmt/format.h>

#include <limits>

#include "core/error.h"
#include "io/gguf_parser.h"

namespace llmctl {

const char* gguf_value_type_name(GgufValueType t) {
  switch (t) {
    case GgufValueType::UINT8: return "u8";
    case GgufValueType::INT8: return "i8";
    case GgufValueType::UINT16: return "u16";
    case GgufValueType::INT16: return "i16";
    case GgufValueType::UINT32: return "u32";
    case GgufValueType::INT32: return "i32";
    case GgufValueType::FLOAT32: return "f32";
    case GgufValueType::BOOL: return "bool";
    case GgufValueType::STRING: return "string";
    case GgufValueType::ARRAY: return "array";
    case GgufValueType::UINT64: return "u64";
    case GgufValueType::INT64: return "i64";
    case GgufValueType::FLOAT64: return "f64";
  }
  return "unknown";
}

// ---------------------------------------------------------------------------
// GgufValue
// ---------------------------------------------------------------------------
bool GgufValue::is_integer() const {
  switch (type) {
    case GgufValueType::UINT8: case GgufValueType::INT8: case GgufValueType::UINT16:
    case GgufValueType::INT16: case GgufValueType::UINT32: case GgufValueType::INT32:
    case GgufValueType::UINT64: case GgufValueType::INT64:
      return true;
    default:
      return false;
  }
}

bool GgufValue::is_float() const {
  return type == GgufValueType::FLOAT32 || type == GgufValueType::FLOAT64;
}

namespace {
bool is_unsigned(GgufValueType t) {
  return t == GgufValueType::UINT8 || t == GgufValueType::UINT16 || t == GgufValueType::UINT32 ||
         t == GgufValueType::UINT64;
}
}  // namespace

int64_t GgufValue::as_int() const {
  if (!is_integer()) throw Error(fmt::format("expected an integer, got {}", gguf_value_type_name(type)));
  if (!is_unsigned(type)) return i;
  if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    throw Error(fmt::format("integer {} does not fit in int64", u));
  return static_cast<int64_t>(u);
}

double GgufValue::as_float() const {
  if (is_float()) return f;
  if (!is_integer()) throw Error(fmt::format("expected a number, got {}", gguf_value_type_name(type)));
  return is_unsigned(type) ? static_cast<double>(u) : static_cast<double>(i);
}

int64_t GgufTensorInfo::n_elements() const {
  int64_t n = 1;
  for (const int64_t d : shape) n *= d;  // the reader rejected shapes whose product overflows
  return n;
}

// ---------------------------------------------------------------------------
// GgufFile
// ---------------------------------------------------------------------------
GgufFile GgufFile::open(const std::string& path) {
  GgufFile f;
  f.path_ = path;
  f.map_ = std::make_shared<MappedFile>(path);
  GgufParser::parse(f, f.map_->data(), f.map_->size());
  return f;
}

GgufFile GgufFile::from_memory(std::shared_ptr<const std::vector<uint8_t>> bytes, std::string name) {
  LLMCTL_ASSERT(bytes != nullptr);
  GgufFile f;
  f.path_ = std::move(name);
  f.memory_ = std::move(bytes);
  GgufParser::parse(f, f.memory_->data(), f.memory_->size());
  return f;
}

uint64_t GgufFile::file_size() const { return file_size_; }

const GgufValue* GgufFile::find(std::string_view key) const {
  for (const auto& kv : kv_)
    if (kv.key == key) return &kv.value;
  return nullptr;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

namespace {

std::string describe(const GgufValue& v) {
  if (v.type == GgufValueType::ARRAY)
    return fmt::format("array of {}", gguf_value_type_name(v.arr.elem_type()));
  return gguf_value_type_name(v.type);
}

[[noreturn]] void wrong_type(const std::string& path, std::string_view key, const char* expected,
                             const GgufValue& v) {
  throw FileError(path, fmt::format("metadata key '{}': expected {}, got {}", key, expected, describe(v)));
}

const GgufValue* find_array(const GgufFile& f, std::string_view key, const char* expected) {
  const GgufValue* v = f.find(key);
  if (v != nullptr && v->type != GgufValueType::ARRAY) wrong_type(f.path(), key, expected, *v);
  return v;
}

}  // namespace

std::string GgufFile::get_string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) throw FileError(path_, fmt::format("metadata key '{}' is missing", key));
  if (v->type != GgufValueType::STRING) wrong_type(path_, key, "string", *v);
  return v->s;
}

std::string GgufFile::get_string_or(std::string_view key, std::string fallback) const {
  if (find(key) == nullptr) return fallback;
  return get_string(key);
}

std::optional<int64_t> GgufFile::get_int(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_integer()) wrong_type(path_, key, "an integer", *v);
  try {
    return v->as_int();
  } catch (const Error& e) {
    throw FileError(path_, fmt::format("metadata key '{}': {}", key, e.what()));
  }
}

int64_t GgufFile::get_int_or(std::string_view key, int64_t fallback) const {
  return get_int(key).value_or(fallback);
}

double GgufFile::get_float_or(std::string_view key, double fallback) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return fallback;
  if (!v->is_integer() && !v->is_float()) wrong_type(path_, key, "a number", *v);
  return v->as_float();
}

bool GgufFile::get_bool_or(std::string_view key, bool fallback) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return fallback;
  if (v->type != GgufValueType::BOOL) wrong_type(path_, key, "bool", *v);
  return v->u != 0;
}

std::vector<std::string> GgufFile::get_string_array(std::string_view key) const {
  const std::vector<std::string_view> views = get_string_array_views(key);
  return std::vector<std::string>(views.begin(), views.end());
}

std::vector<std::string_view> GgufFile::get_string_array_views(std::string_view key) const {
  const GgufValue* v = find_array(*this, key, "array of string");
  if (v == nullptr) return {};
  if (v->arr.elem_type() != GgufValueType::STRING) wrong_type(path_, key, "array of string", *v);
  std::vector<std::string_view> out(v->arr.size());
  for (size_t k = 0; k < out.size(); ++k) out[k] = v->arr.string_at(k);
  return out;
}

std::vector<float> GgufFile::get_f32_array(std::string_view key) const {
  const GgufValue* v = find_array(*this, key, "array of f32");
  if (v == nullptr) return {};
  if (v->arr.elem_type() != GgufValueType::FLOAT32) wrong_type(path_, key, "array of f32", *v);
  std::vector<float> out(v->arr.size());
  for (size_t k = 0; k < out.size(); ++k) out[k] = static_cast<float>(v->arr.float_at(k));  // exact
  return out;
}

std::vector<int32_t> GgufFile::get_i32_array(std::string_view key) const {
  const GgufValue* v = find_array(*this, key, "array of i32");
  if (v == nullptr) return {};
  // Accept any integer element type whose values fit; writers differ (i32 vs u32 for ids).
  GgufValue probe;
  probe.type = v->arr.elem_type();
  if (!probe.is_integer()) wrong_type(path_, key, "array of i32", *v);
  std::vector<int32_t> out(v->arr.size());
  for (size_t k = 0; k < out.size(); ++k) {
    int64_t e = 0;
    try {
      e = v->arr.int_at(k);
    } catch (const Error&) {
      e = INT64_MAX;  // a u64 above int64: reported as not fitting below
    }
    if (e < INT32_MIN || e > INT32_MAX)
      throw FileError(path_, fmt::format("metadata key '{}': element {} does not fit in i32", key, k));
    out[k] = static_cast<int32_t>(e);
  }
  return out;
}

}  // namespace llmctl
