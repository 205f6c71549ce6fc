// GgufArray: the packed elements of a GGUF ARRAY value (gguf.h).
#include <fmt/format.h>

#include <cstring>
#include <limits>

#include "core/error.h"
#include "core/unaligned.h"
#include "io/gguf.h"

namespace llmctl {

size_t gguf_scalar_size(GgufValueType t) {
  switch (t) {
    case GgufValueType::UINT8: case GgufValueType::INT8: case GgufValueType::BOOL: return 1;
    case GgufValueType::UINT16: case GgufValueType::INT16: return 2;
    case GgufValueType::UINT32: case GgufValueType::INT32: case GgufValueType::FLOAT32: return 4;
    case GgufValueType::UINT64: case GgufValueType::INT64: case GgufValueType::FLOAT64: return 8;
    case GgufValueType::STRING: case GgufValueType::ARRAY: return 0;
  }
  return 0;
}

namespace {

template <class T>
void store(std::vector<uint8_t>& out, T v) {
  uint8_t b[sizeof v];
  std::memcpy(b, &v, sizeof v);
  out.insert(out.end(), b, b + sizeof v);
}

// `v` narrowed to T, or an Error naming the array's element type.
template <class T>
T narrowed(uint64_t v, GgufValueType t) {
  if (v > static_cast<uint64_t>(std::numeric_limits<T>::max()))
    throw Error(fmt::format("value {} does not fit an array of {}", v, gguf_value_type_name(t)));
  return static_cast<T>(v);
}
template <class T>
T narrowed(int64_t v, GgufValueType t) {
  if (v < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
      v > static_cast<int64_t>(std::numeric_limits<T>::max()))
    throw Error(fmt::format("value {} does not fit an array of {}", v, gguf_value_type_name(t)));
  return static_cast<T>(v);
}

}  // namespace

GgufValue GgufArray::operator[](size_t k) const {
  LLMCTL_ASSERT(k < n_);
  if (elem_ == GgufValueType::ARRAY) return arrays_[k];
  GgufValue v;
  v.type = elem_;
  if (elem_ == GgufValueType::STRING) {
    v.s = std::string(string_at(k));
    return v;
  }
  const uint8_t* p = scalars_.data() + k * gguf_scalar_size(elem_);
  switch (elem_) {
    case GgufValueType::UINT8: case GgufValueType::BOOL: v.u = load_unaligned<uint8_t>(p); break;
    case GgufValueType::INT8: v.i = load_unaligned<int8_t>(p); break;
    case GgufValueType::UINT16: v.u = load_unaligned<uint16_t>(p); break;
    case GgufValueType::INT16: v.i = load_unaligned<int16_t>(p); break;
    case GgufValueType::UINT32: v.u = load_unaligned<uint32_t>(p); break;
    case GgufValueType::INT32: v.i = load_unaligned<int32_t>(p); break;
    case GgufValueType::UINT64: v.u = load_unaligned<uint64_t>(p); break;
    case GgufValueType::INT64: v.i = load_unaligned<int64_t>(p); break;
    case GgufValueType::FLOAT32: v.f = static_cast<double>(load_unaligned<float>(p)); break;
    case GgufValueType::FLOAT64: v.f = load_unaligned<double>(p); break;
    case GgufValueType::STRING: case GgufValueType::ARRAY: break;  // handled above
  }
  return v;
}

GgufValue GgufArray::front() const { return (*this)[0]; }
GgufValue GgufArray::back() const { return (*this)[n_ - 1]; }

std::string_view GgufArray::string_at(size_t k) const {
  LLMCTL_ASSERT(elem_ == GgufValueType::STRING && k < n_);
  const size_t begin = k == 0 ? 0 : string_ends_[k - 1];
  return std::string_view(strings_).substr(begin, string_ends_[k] - begin);
}

const GgufValue& GgufArray::array_at(size_t k) const {
  LLMCTL_ASSERT(elem_ == GgufValueType::ARRAY && k < n_);
  return arrays_[k];
}

int64_t GgufArray::int_at(size_t k) const {
  LLMCTL_ASSERT(k < n_);
  const uint8_t* p = scalars_.data() + k * gguf_scalar_size(elem_);
  switch (elem_) {
    case GgufValueType::UINT8: case GgufValueType::BOOL: return load_unaligned<uint8_t>(p);
    case GgufValueType::INT8: return load_unaligned<int8_t>(p);
    case GgufValueType::UINT16: return load_unaligned<uint16_t>(p);
    case GgufValueType::INT16: return load_unaligned<int16_t>(p);
    case GgufValueType::UINT32: return load_unaligned<uint32_t>(p);
    case GgufValueType::INT32: return load_unaligned<int32_t>(p);
    case GgufValueType::INT64: return load_unaligned<int64_t>(p);
    default: return (*this)[k].as_int();  // u64 (checked), or the type error
  }
}

double GgufArray::float_at(size_t k) const {
  LLMCTL_ASSERT(k < n_);
  if (elem_ == GgufValueType::FLOAT32)
    return static_cast<double>(load_unaligned<float>(scalars_.data() + k * sizeof(float)));
  return (*this)[k].as_float();
}

void GgufArray::push_back(const GgufValue& e) {
  if (e.type != elem_)
    throw Error(fmt::format("an array of {} cannot hold a {} element", gguf_value_type_name(elem_),
                            gguf_value_type_name(e.type)));
  switch (elem_) {
    case GgufValueType::UINT8: store(scalars_, narrowed<uint8_t>(e.u, elem_)); break;
    case GgufValueType::BOOL:
      if (e.u > 1) throw Error(fmt::format("bool value {}, expected 0 or 1", e.u));
      store(scalars_, static_cast<uint8_t>(e.u));
      break;
    case GgufValueType::INT8: store(scalars_, narrowed<int8_t>(e.i, elem_)); break;
    case GgufValueType::UINT16: store(scalars_, narrowed<uint16_t>(e.u, elem_)); break;
    case GgufValueType::INT16: store(scalars_, narrowed<int16_t>(e.i, elem_)); break;
    case GgufValueType::UINT32: store(scalars_, narrowed<uint32_t>(e.u, elem_)); break;
    case GgufValueType::INT32: store(scalars_, narrowed<int32_t>(e.i, elem_)); break;
    case GgufValueType::UINT64: store(scalars_, e.u); break;
    case GgufValueType::INT64: store(scalars_, e.i); break;
    case GgufValueType::FLOAT32: store(scalars_, static_cast<float>(e.f)); break;
    case GgufValueType::FLOAT64: store(scalars_, e.f); break;
    case GgufValueType::STRING: append_string(e.s); return;
    case GgufValueType::ARRAY: arrays_.push_back(e); break;
  }
  ++n_;
}

void GgufArray::pop_back() {
  LLMCTL_ASSERT(n_ > 0);
  --n_;
  if (elem_ == GgufValueType::ARRAY) {
    arrays_.pop_back();
  } else if (elem_ == GgufValueType::STRING) {
    string_ends_.pop_back();
    strings_.resize(string_ends_.empty() ? 0 : string_ends_.back());
  } else {
    scalars_.resize(n_ * gguf_scalar_size(elem_));
  }
}

void GgufArray::reserve(size_t n) {
  if (elem_ == GgufValueType::ARRAY) arrays_.reserve(n);
  else if (elem_ == GgufValueType::STRING) string_ends_.reserve(n);
  else scalars_.reserve(n * gguf_scalar_size(elem_));
}

void GgufArray::append_scalars(const uint8_t* bytes, size_t n) {
  const size_t size = gguf_scalar_size(elem_);
  LLMCTL_ASSERT(size > 0);
  scalars_.insert(scalars_.end(), bytes, bytes + n * size);
  n_ += n;
}

void GgufArray::append_string(std::string_view s) {
  LLMCTL_ASSERT(elem_ == GgufValueType::STRING);
  strings_.append(s);
  string_ends_.push_back(strings_.size());
  ++n_;
}

}  // namespace llmctl
