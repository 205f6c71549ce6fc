// Safetensors parser (safetensors.h). Order of checks: the 8-byte length against the file and
// the cap; the JSON's nesting and size (a byte scan, before any DOM is built); the JSON
// itself; then each entry's dtype, shape, offsets and size, and finally overlaps.
#include "io/safetensors.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>
#include <unordered_set>

#include "core/error.h"
#include "io/json_error.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the safetensors reader assumes a little-endian host"
#endif

namespace llmctl {

using nlohmann::json;

namespace {

// A name from the file as it appears in a message: JSON-escaped (no control bytes reach a
// terminal), without the quotes, cut after 80 bytes.
std::string shown(const std::string& name) {
  const std::string escaped = json(name).dump();
  const std::string inner = escaped.substr(1, escaped.size() - 2);
  return inner.size() > 80 ? inner.substr(0, 80) + "..." : inner;
}

// Bytes per element of a dtype llmctl reads; 0 for any other dtype string.
uint64_t dtype_size(const std::string& dtype, GgmlType* type) {
  if (dtype == "F32") return *type = GgmlType::F32, 4;
  if (dtype == "F16") return *type = GgmlType::F16, 2;
  if (dtype == "BF16") return *type = GgmlType::BF16, 2;
  return 0;
}

// Nesting depth and value count of the JSON text, so that neither a deeply nested nor a huge
// header reaches the DOM parser. Strings are skipped (brackets and commas inside them do not
// count); the text need not be valid JSON, the parser judges that afterwards.
void prescan(const std::string& path, const char* text, uint64_t n) {
  uint32_t depth = 0;
  uint64_t values = 0;
  bool in_string = false;
  for (uint64_t i = 0; i < n; ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;  // the escaped character cannot end the string
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > kSafetensorsMaxDepth)
        throw FileError(
            path, fmt::format("header JSON is nested deeper than {} levels", kSafetensorsMaxDepth),
            8 + i);
      ++values;
    } else if (c == '}' || c == ']') {
      if (depth > 0) --depth;
    } else if (c == ',') {
      if (++values > kSafetensorsMaxValues)
        throw FileError(path,
                        fmt::format("header JSON holds more than {} values (llmctl's limit)",
                                    kSafetensorsMaxValues),
                        8 + i);
    }
  }
}

// Where tensor `name`'s entry starts in the file (its quoted key), for error offsets; the
// header start when the key is written with escapes we do not reproduce.
uint64_t entry_offset(const std::string& header, const std::string& name) {
  const size_t at = header.find(json(name).dump());
  return 8 + (at == std::string::npos ? 0 : at);
}

// A non-negative JSON integer that fits int64, or throws naming `what`.
int64_t json_size(const json& v, const std::string& path, const std::string& what, uint64_t at) {
  if (!v.is_number_unsigned() ||
      v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    throw FileError(path,
                    fmt::format("{} is {}, expected a non-negative integer below 2^63", what,
                                v.dump().substr(0, 40)),
                    at);
  return static_cast<int64_t>(v.get<uint64_t>());
}

}  // namespace

int64_t SafetensorsTensor::n_elements() const {
  int64_t n = 1;
  for (const int64_t d : shape) n *= d;  // checked against overflow by the parser
  return n;
}

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  SafetensorsFile f;
  f.path_ = path;
  f.map_ = std::make_shared<MappedFile>(path);
  f.parse(f.map_->data(), f.map_->size());
  return f;
}

SafetensorsFile SafetensorsFile::from_memory(std::shared_ptr<const std::vector<uint8_t>> bytes,
                                             std::string name) {
  LLMCTL_ASSERT(bytes != nullptr);
  SafetensorsFile f;
  f.path_ = std::move(name);
  f.memory_ = std::move(bytes);
  f.parse(f.memory_->data(), f.memory_->size());
  return f;
}

const SafetensorsTensor* SafetensorsFile::find(std::string_view name) const {
  // tensors_ is sorted by name: the JSON object's keys come out of the DOM in order.
  const auto it = std::lower_bound(
      tensors_.begin(), tensors_.end(), name,
      [](const SafetensorsTensor& t, std::string_view n) { return std::string_view(t.name) < n; });
  return it != tensors_.end() && it->name == name ? &*it : nullptr;
}

void SafetensorsFile::parse(const uint8_t* data, uint64_t size) {
  const std::string& p = path_;
  if (size < 8)
    throw FileError(
        p, fmt::format("file of {} bytes is too small for the 8-byte header length", size), 0);
  uint64_t n = 0;
  std::memcpy(&n, data, 8);
  if (n > kSafetensorsMaxHeader)
    throw FileError(
        p, fmt::format("header length {} exceeds the limit of {} bytes", n, kSafetensorsMaxHeader),
        0, "is this a safetensors file?");
  if (n > size - 8)
    throw FileError(p,
                    fmt::format("header length {} runs past the end of the file ({} bytes "
                                "after the length)",
                                n, size - 8),
                    0);
  if (n < 2)
    throw FileError(p, fmt::format("header length {} is too short for a JSON object", n), 0);
  header_size_ = n;
  const char* text = reinterpret_cast<const char*>(data + 8);
  prescan(p, text, n);

  // Duplicate top-level keys would silently keep the last one in the DOM: refuse them.
  std::unordered_set<std::string> keys;
  std::string duplicate;
  const json::parser_callback_t on_event = [&](int depth, json::parse_event_t event, json& v) {
    if (depth == 1 && event == json::parse_event_t::key && duplicate.empty() &&
        !keys.insert(v.get<std::string>()).second)
      duplicate = v.get<std::string>();
    return true;
  };
  json header;
  try {
    header = json::parse(text, text + n, on_event);
  } catch (const json::parse_error& e) {
    throw FileError(p, fmt::format("header is not valid JSON: {}", json_error_text(e.what())),
                    8 + (e.byte > 0 ? e.byte - 1 : 0));
  } catch (const json::exception& e) {
    // out_of_range 406: a number like 1e400 that overflows a double (found by fuzz_hf_config).
    throw FileError(p, fmt::format("header is not usable JSON: {}", json_error_text(e.what())), 8);
  }
  if (!header.is_object())
    throw FileError(p, fmt::format("header is a JSON {}, expected an object", header.type_name()),
                    8);
  if (!duplicate.empty())
    throw FileError(p, fmt::format("header names '{}' twice", shown(duplicate)), 8);

  const std::string header_text(text, static_cast<size_t>(n));
  const uint64_t buffer_size = size - 8 - n;
  const uint8_t* buffer = data + 8 + n;
  for (const auto& [name, e] : header.items()) {
    const uint64_t at = entry_offset(header_text, name);
    const std::string tn = fmt::format("tensor '{}'", shown(name));
    if (name == "__metadata__") {
      if (!e.is_object())
        throw FileError(
            p,
            fmt::format("__metadata__ is a JSON {}, expected an object of strings", e.type_name()),
            at);
      for (const auto& [key, value] : e.items()) {
        if (!value.is_string())
          throw FileError(p,
                          fmt::format("__metadata__ '{}' is a JSON {}, expected a string",
                                      shown(key), value.type_name()),
                          at);
        metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") ||
        !e.contains("data_offsets"))
      throw FileError(p, tn + ": expected an object with dtype, shape and data_offsets", at);
    SafetensorsTensor t;
    t.name = name;

    const json& dtype = e["dtype"];
    if (!dtype.is_string())
      throw FileError(p, fmt::format("{}: dtype is {}, expected a string", tn, dtype.dump()), at);
    const uint64_t elem = dtype_size(dtype.get<std::string>(), &t.type);
    if (elem == 0)
      throw FileError(p,
                      fmt::format("{}: dtype {} is not supported (supported: F32, F16, BF16)", tn,
                                  shown(dtype.get<std::string>())),
                      at, "convert the checkpoint to float32, float16 or bfloat16");

    const json& shape = e["shape"];
    if (!shape.is_array() || shape.size() > kSafetensorsMaxDims)
      throw FileError(p,
                      fmt::format("{}: shape is {}, expected an array of at most {} sizes", tn,
                                  shape.dump().substr(0, 80), kSafetensorsMaxDims),
                      at);
    uint64_t count = 1;  // stays <= INT64_MAX
    for (const json& d : shape) {
      const int64_t dim = json_size(d, p, tn + ": shape entry", at);
      t.shape.push_back(dim);
      if (dim != 0 && count > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) /
                                  static_cast<uint64_t>(dim))
        throw FileError(
            p, fmt::format("{}: element count of shape {} overflows int64", tn, shape.dump()), at);
      count *= static_cast<uint64_t>(dim);
    }
    if (count > UINT64_MAX / elem)
      throw FileError(
          p, fmt::format("{}: byte size of shape {} overflows 64 bits", tn, shape.dump()), at);

    const json& offs = e["data_offsets"];
    if (!offs.is_array() || offs.size() != 2)
      throw FileError(p,
                      fmt::format("{}: data_offsets is {}, expected [begin, end]", tn,
                                  offs.dump().substr(0, 80)),
                      at);
    t.begin = static_cast<uint64_t>(json_size(offs[0], p, tn + ": data_offsets begin", at));
    t.end = static_cast<uint64_t>(json_size(offs[1], p, tn + ": data_offsets end", at));
    if (t.begin > t.end)
      throw FileError(
          p, fmt::format("{}: data_offsets [{}, {}] end before they begin", tn, t.begin, t.end),
          at);
    if (t.end > buffer_size)
      throw FileError(p,
                      fmt::format("{}: data_offsets [{}, {}] run past the end of the {}-byte "
                                  "data buffer",
                                  tn, t.begin, t.end, buffer_size),
                      at);
    if (t.end - t.begin != count * elem)
      throw FileError(
          p,
          fmt::format("{}: data_offsets [{}, {}] hold {} bytes, but {} {} needs {}", tn, t.begin,
                      t.end, t.end - t.begin, dtype.get<std::string>(), shape.dump(), count * elem),
          at);
    t.data = buffer + t.begin;
    tensors_.push_back(std::move(t));
  }

  // No two tensors may share bytes (empty tensors share none).
  std::vector<size_t> order(tensors_.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return tensors_[a].begin < tensors_[b].begin; });
  const SafetensorsTensor* prev = nullptr;
  for (const size_t i : order) {
    const SafetensorsTensor& cur = tensors_[i];
    if (cur.begin == cur.end) continue;
    if (prev != nullptr && prev->end > cur.begin)
      throw FileError(
          p,
          fmt::format("tensor '{}': data [{}, {}) overlaps tensor '{}' [{}, {})", shown(cur.name),
                      cur.begin, cur.end, shown(prev->name), prev->begin, prev->end),
          entry_offset(header_text, cur.name));
    prev = &cur;
  }
}

}  // namespace llmctl
