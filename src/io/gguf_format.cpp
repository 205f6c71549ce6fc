#include "io/gguf_format.h"

#include <fmt/format.h>

#include <cstdlib>
#include <map>

namespace llmctl {

std::string gguf_type_label(const GgufValue& v) {
  if (v.type != GgufValueType::ARRAY) return gguf_value_type_name(v.type);
  if (v.arr.elem_type() == GgufValueType::ARRAY && !v.arr.empty())
    return fmt::format("array[{}]", gguf_type_label(v.arr.front()));
  return fmt::format("array[{}]", gguf_value_type_name(v.arr.elem_type()));
}

namespace {

// Quotes `s` with C-style escapes for control bytes, quotes and backslashes; other bytes
// (UTF-8 included) pass through. Cut to `max` bytes on a UTF-8 boundary when longer.
std::string quote(const std::string& s, size_t max) {
  size_t n = s.size();
  if (max > 0 && n > max) {
    n = max;
    while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0u) == 0x80u) --n;  // not mid-character
  }
  std::string out = "\"";
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20 || c == 0x7f) out += fmt::format("\\x{:02x}", c);
        else out += static_cast<char>(c);
    }
  }
  out += "\"";
  if (n < s.size()) out += fmt::format("... ({} bytes)", s.size());
  return out;
}

std::string scalar_text(const GgufValue& v, size_t max_string) {
  switch (v.type) {
    case GgufValueType::UINT8: case GgufValueType::UINT16: case GgufValueType::UINT32:
    case GgufValueType::UINT64:
      return fmt::format("{}", v.u);
    case GgufValueType::INT8: case GgufValueType::INT16: case GgufValueType::INT32:
    case GgufValueType::INT64:
      return fmt::format("{}", v.i);
    case GgufValueType::FLOAT32: return fmt::format("{}", static_cast<float>(v.f));  // shortest f32
    case GgufValueType::FLOAT64: return fmt::format("{}", v.f);
    case GgufValueType::BOOL: return v.u != 0 ? "true" : "false";
    case GgufValueType::STRING: return quote(v.s, max_string);
    case GgufValueType::ARRAY: break;
  }
  return "?";
}

}  // namespace

std::string format_gguf_value(const GgufValue& v, const GgufFormatOptions& opt) {
  if (v.type != GgufValueType::ARRAY) return scalar_text(v, opt.max_string);
  const bool summarise = opt.max_array > 0 && v.arr.size() > opt.max_array;
  const size_t shown = summarise ? std::min(opt.text_head, v.arr.size()) : v.arr.size();
  std::string out;
  for (size_t k = 0; k < shown; ++k) {
    if (k > 0) out += ", ";
    out += format_gguf_value(v.arr[k], opt);
  }
  if (!summarise) return "[" + out + "]";
  return fmt::format("[{} x {}] {}{}", gguf_value_type_name(v.arr.elem_type()), v.arr.size(), out,
                     shown > 0 ? ", ..." : "...");
}

nlohmann::ordered_json gguf_value_to_json(const GgufValue& v, const GgufFormatOptions& opt) {
  using J = nlohmann::ordered_json;
  switch (v.type) {
    case GgufValueType::UINT8: case GgufValueType::UINT16: case GgufValueType::UINT32:
    case GgufValueType::UINT64:
      return J(v.u);
    case GgufValueType::INT8: case GgufValueType::INT16: case GgufValueType::INT32:
    case GgufValueType::INT64:
      return J(v.i);
    case GgufValueType::FLOAT32:
      // The shortest decimal that reads back as the same f32 (1e-05, not 9.99999974e-06).
      return J(std::strtod(fmt::format("{}", static_cast<float>(v.f)).c_str(), nullptr));
    case GgufValueType::FLOAT64: return J(v.f);
    case GgufValueType::BOOL: return J(v.u != 0);
    case GgufValueType::STRING: return J(v.s);
    case GgufValueType::ARRAY: break;
  }
  const bool summarise = opt.max_array > 0 && v.arr.size() > opt.max_array;
  J elems = J::array();
  const size_t shown = summarise ? std::min(opt.json_head, v.arr.size()) : v.arr.size();
  for (size_t k = 0; k < shown; ++k) elems.push_back(gguf_value_to_json(v.arr[k], opt));
  if (!summarise) return elems;
  J s = J::object();
  s["type"] = gguf_value_type_name(v.arr.elem_type());
  s["count"] = v.arr.size();
  s["head"] = std::move(elems);
  return s;
}

std::string format_shape(const std::vector<int64_t>& shape) { return fmt::format("{}", fmt::join(shape, " x ")); }

std::vector<GgufTypeTotal> gguf_type_totals(const GgufFile& f) {
  std::map<uint32_t, GgufTypeTotal> by_type;
  for (const auto& t : f.tensors()) {
    GgufTypeTotal& tot = by_type[static_cast<uint32_t>(t.type)];
    tot.type = t.type;
    tot.n_tensors += 1;
    tot.n_elements += t.n_elements();
    tot.n_bytes += t.n_bytes;
  }
  std::vector<GgufTypeTotal> out;
  for (const auto& [id, tot] : by_type) out.push_back(tot);
  return out;
}

int64_t gguf_parameter_count(const GgufFile& f) {
  int64_t n = 0;
  for (const auto& t : f.tensors()) n += t.n_elements();
  return n;
}

nlohmann::ordered_json gguf_to_json(const GgufFile& f, const GgufFormatOptions& opt) {
  using J = nlohmann::ordered_json;
  J j = J::object();
  j["file"] = f.path();
  j["version"] = f.version();
  j["file_size"] = f.file_size();
  j["alignment"] = f.alignment();
  j["data_offset"] = f.data_offset();
  J meta = J::object(), types = J::object();
  for (const auto& kv : f.metadata()) {
    meta[kv.key] = gguf_value_to_json(kv.value, opt);
    types[kv.key] = gguf_type_label(kv.value);
  }
  j["metadata"] = std::move(meta);
  j["metadata_types"] = std::move(types);
  J tensors = J::array();
  for (const auto& t : f.tensors()) {
    tensors.push_back(J{{"name", t.name},
                        {"type", ggml_type_name(t.type)},
                        {"shape", t.shape},
                        {"n_elements", t.n_elements()},
                        {"bytes", t.n_bytes},
                        {"offset", t.offset}});
  }
  j["tensors"] = std::move(tensors);
  J totals = J::array();
  uint64_t bytes = 0;
  for (const auto& tot : gguf_type_totals(f)) {
    totals.push_back(J{{"type", ggml_type_name(tot.type)},
                       {"tensors", tot.n_tensors},
                       {"n_elements", tot.n_elements},
                       {"bytes", tot.n_bytes}});
    bytes += tot.n_bytes;
  }
  j["totals"] = std::move(totals);
  j["n_params"] = gguf_parameter_count(f);
  j["tensor_bytes"] = bytes;
  return j;
}

}  // namespace llmctl
