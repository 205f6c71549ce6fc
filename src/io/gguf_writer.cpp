#include "io/gguf_writer.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>

#include "core/error.h"
#include "core/output_file.h"

namespace llmctl {

// ---------------------------------------------------------------------------
// Value constructors
// ---------------------------------------------------------------------------
namespace gguf_value {
namespace {
GgufValue unsigned_value(GgufValueType t, uint64_t v) {
  GgufValue x;
  x.type = t;
  x.u = v;
  return x;
}
GgufValue signed_value(GgufValueType t, int64_t v) {
  GgufValue x;
  x.type = t;
  x.i = v;
  return x;
}
GgufValue float_value(GgufValueType t, double v) {
  GgufValue x;
  x.type = t;
  x.f = v;
  return x;
}
}  // namespace

GgufValue u8(uint8_t v) { return unsigned_value(GgufValueType::UINT8, v); }
GgufValue i8(int8_t v) { return signed_value(GgufValueType::INT8, v); }
GgufValue u16(uint16_t v) { return unsigned_value(GgufValueType::UINT16, v); }
GgufValue i16(int16_t v) { return signed_value(GgufValueType::INT16, v); }
GgufValue u32(uint32_t v) { return unsigned_value(GgufValueType::UINT32, v); }
GgufValue i32(int32_t v) { return signed_value(GgufValueType::INT32, v); }
GgufValue u64(uint64_t v) { return unsigned_value(GgufValueType::UINT64, v); }
GgufValue i64(int64_t v) { return signed_value(GgufValueType::INT64, v); }
GgufValue f32(float v) { return float_value(GgufValueType::FLOAT32, static_cast<double>(v)); }
GgufValue f64(double v) { return float_value(GgufValueType::FLOAT64, v); }
GgufValue boolean(bool v) { return unsigned_value(GgufValueType::BOOL, v ? 1 : 0); }
GgufValue string(std::string v) {
  GgufValue x;
  x.type = GgufValueType::STRING;
  x.s = std::move(v);
  return x;
}
GgufValue array(GgufValueType elem, std::vector<GgufValue> elems) {
  GgufValue x;
  x.type = GgufValueType::ARRAY;
  x.arr = GgufArray(elem);
  x.arr.reserve(elems.size());
  for (const GgufValue& e : elems) x.arr.push_back(e);  // throws on a mismatched element
  return x;
}
GgufValue string_array(const std::vector<std::string>& v) {
  GgufValue x;
  x.type = GgufValueType::ARRAY;
  x.arr = GgufArray(GgufValueType::STRING);
  x.arr.reserve(v.size());
  for (const auto& s : v) x.arr.append_string(s);
  return x;
}
GgufValue f32_array(const std::vector<float>& v) {
  std::vector<GgufValue> e;
  e.reserve(v.size());
  for (const float x : v) e.push_back(f32(x));
  return array(GgufValueType::FLOAT32, std::move(e));
}
GgufValue i32_array(const std::vector<int32_t>& v) {
  std::vector<GgufValue> e;
  e.reserve(v.size());
  for (const int32_t x : v) e.push_back(i32(x));
  return array(GgufValueType::INT32, std::move(e));
}
}  // namespace gguf_value

// ---------------------------------------------------------------------------
// Encoding
// ---------------------------------------------------------------------------
namespace {

class Out {
 public:
  std::vector<uint8_t> bytes;

  template <class T>
  void put(T v) {
    const size_t at = bytes.size();
    bytes.resize(at + sizeof v);
    std::memcpy(bytes.data() + at, &v, sizeof v);
  }
  void put_string(const std::string& s) {
    put<uint64_t>(s.size());
    bytes.insert(bytes.end(), s.begin(), s.end());
  }
  void pad_to(uint64_t alignment) {
    while (bytes.size() % alignment != 0) bytes.push_back(0);
  }
};

// Checks that an unsigned/signed value fits the width of its declared type.
template <class T>
T narrow_checked(const GgufValue& v, const std::string& key) {
  if constexpr (std::numeric_limits<T>::is_signed) {
    if (v.i < std::numeric_limits<T>::min() || v.i > std::numeric_limits<T>::max())
      throw Error(fmt::format("key '{}': value {} does not fit in {}", key, v.i, gguf_value_type_name(v.type)));
    return static_cast<T>(v.i);
  } else {
    if (v.u > std::numeric_limits<T>::max())
      throw Error(fmt::format("key '{}': value {} does not fit in {}", key, v.u, gguf_value_type_name(v.type)));
    return static_cast<T>(v.u);
  }
}

void put_value(Out& o, const GgufValue& v, const std::string& key, uint32_t depth) {
  switch (v.type) {
    case GgufValueType::UINT8: o.put(narrow_checked<uint8_t>(v, key)); break;
    case GgufValueType::INT8: o.put(narrow_checked<int8_t>(v, key)); break;
    case GgufValueType::UINT16: o.put(narrow_checked<uint16_t>(v, key)); break;
    case GgufValueType::INT16: o.put(narrow_checked<int16_t>(v, key)); break;
    case GgufValueType::UINT32: o.put(narrow_checked<uint32_t>(v, key)); break;
    case GgufValueType::INT32: o.put(narrow_checked<int32_t>(v, key)); break;
    case GgufValueType::UINT64: o.put(v.u); break;
    case GgufValueType::INT64: o.put(v.i); break;
    case GgufValueType::FLOAT32: o.put(static_cast<float>(v.f)); break;
    case GgufValueType::FLOAT64: o.put(v.f); break;
    case GgufValueType::BOOL:
      if (v.u > 1) throw Error(fmt::format("key '{}': bool value {}", key, v.u));
      o.put(static_cast<uint8_t>(v.u));
      break;
    case GgufValueType::STRING: o.put_string(v.s); break;
    case GgufValueType::ARRAY:
      if (depth >= kGgufMaxArrayDepth)
        throw Error(fmt::format("key '{}': arrays nested deeper than {} levels", key, kGgufMaxArrayDepth));
      o.put(static_cast<uint32_t>(v.arr.elem_type()));
      o.put<uint64_t>(v.arr.size());
      for (size_t k = 0; k < v.arr.size(); ++k) put_value(o, v.arr[k], key, depth + 1);
      break;
    default:
      throw Error(fmt::format("key '{}': unknown value type {}", key, static_cast<uint32_t>(v.type)));
  }
}

// Byte size of a tensor of `type` and `shape`; throws Error on an invalid shape.
uint64_t tensor_bytes(const std::string& name, GgmlType type, const std::vector<int64_t>& shape) {
  const GgmlTypeTraits tr = ggml_traits(type);
  if (shape.empty() || shape.size() > kGgufMaxDims)
    throw Error(fmt::format("tensor '{}': {} dimensions, expected 1..{}", name, shape.size(), kGgufMaxDims));
  int64_t n = 1;
  for (const int64_t d : shape) {
    if (d <= 0 || n > std::numeric_limits<int64_t>::max() / d)
      throw Error(fmt::format("tensor '{}': invalid dimension {}", name, d));
    n *= d;
  }
  if (shape[0] % tr.block_size != 0)
    throw Error(fmt::format("tensor '{}': row length {} is not a multiple of the {} block size {}", name,
                            shape[0], tr.name, tr.block_size));
  return static_cast<uint64_t>(n) / tr.block_size * tr.type_size;
}

}  // namespace

// ---------------------------------------------------------------------------
// GgufBuilder
// ---------------------------------------------------------------------------
GgufBuilder& GgufBuilder::set(std::string key, GgufValue value) {
  for (auto& kv : kv_) {
    if (kv.key == key) {
      kv.value = std::move(value);
      return *this;
    }
  }
  kv_.push_back(GgufKV{std::move(key), std::move(value)});
  return *this;
}

GgufBuilder& GgufBuilder::add_tensor(std::string name, GgmlType type, std::vector<int64_t> shape,
                                     std::vector<uint8_t> bytes) {
  for (const auto& t : tensors_)
    if (t.name == name) throw Error(fmt::format("duplicate tensor name '{}'", name));
  const uint64_t n = tensor_bytes(name, type, shape);
  if (n != bytes.size())
    throw Error(fmt::format("tensor '{}': {} {} needs {} bytes, got {}", name, ggml_type_name(type),
                            fmt::join(shape, "x"), n, bytes.size()));
  tensors_.push_back(Tensor{std::move(name), type, std::move(shape), std::move(bytes)});
  return *this;
}

uint64_t GgufBuilder::alignment() const {
  for (const auto& kv : kv_) {
    if (kv.key != "general.alignment") continue;
    const GgufValue& v = kv.value;
    if (v.type != GgufValueType::UINT32 || v.u == 0 || v.u > UINT32_MAX || (v.u & (v.u - 1)) != 0)
      throw Error("general.alignment must be a u32 power of two");
    return v.u;
  }
  return 32;
}

std::vector<uint8_t> GgufBuilder::build() const {
  const uint64_t align = alignment();
  Out o;
  o.put<uint32_t>(0x46554747u);  // "GGUF"
  o.put<uint32_t>(3);
  o.put<uint64_t>(tensors_.size());
  o.put<uint64_t>(kv_.size());
  for (const auto& kv : kv_) {
    o.put_string(kv.key);
    o.put(static_cast<uint32_t>(kv.value.type));
    put_value(o, kv.value, kv.key, 0);
  }
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    o.put_string(t.name);
    o.put(static_cast<uint32_t>(t.shape.size()));
    for (const int64_t d : t.shape) o.put(d);
    o.put(static_cast<uint32_t>(t.type));
    o.put(offset);
    offset += (t.bytes.size() + align - 1) / align * align;
  }
  // Like gguf-py, a file without tensors ends after its metadata (no padding).
  if (tensors_.empty()) return std::move(o.bytes);
  o.pad_to(align);
  for (const auto& t : tensors_) {
    o.bytes.insert(o.bytes.end(), t.bytes.begin(), t.bytes.end());
    o.pad_to(align);
  }
  return std::move(o.bytes);
}

void GgufBuilder::write(const std::string& path) const {
  const std::vector<uint8_t> image = build();
  write_output_file(path, std::string_view(reinterpret_cast<const char*>(image.data()), image.size()));
}

GgufBuilder GgufBuilder::from_file(const GgufFile& file) {
  GgufBuilder b;
  b.kv_ = file.metadata();
  for (const auto& t : file.tensors()) {
    LLMCTL_ASSERT(t.data != nullptr);
    b.tensors_.push_back(Tensor{t.name, t.type, t.shape, std::vector<uint8_t>(t.data, t.data + t.n_bytes)});
  }
  return b;
}

}  // namespace llmctl
