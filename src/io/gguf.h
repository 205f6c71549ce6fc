#pragma once
// GGUF v2/v3 reader over mmap, and the in-memory model used by the writer.
// CONTRACT: the accessors listed here are used by tokenizer/ and cli/; keep them stable.
// Every size, count and offset is checked against the file before it is used; a bad file
// throws FileError("PATH: WHAT (at byte N)").

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/ggml_type.h"
#include "core/mapped_file.h"

namespace llmctl {

// Limits the reader enforces beyond the format's own rules, so that numbers in a file cannot
// drive unbounded recursion or memory use (a nested array element still costs ~100 bytes).
constexpr uint32_t kGgufMaxArrayDepth = 8;                 // array of array of ... (8 levels)
constexpr uint64_t kGgufMaxMetadataElements = 1ull << 22;  // array elements, all keys together
constexpr uint64_t kGgufMaxKeyLength = 65535;              // GGUF spec: keys < 2^16 bytes
constexpr uint32_t kGgufMaxDims = 4;

enum class GgufValueType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};
const char* gguf_value_type_name(GgufValueType t);

struct GgufValue;

// The elements of an ARRAY value, all of one type, stored packed: scalars as their bytes,
// strings concatenated in one buffer. A 150k-token vocabulary is then a few allocations
// instead of 150k GgufValues of ~100 bytes each, which cost most of a tokenizer's load time.
class GgufArray {
 public:
  GgufArray() = default;
  explicit GgufArray(GgufValueType elem) : elem_(elem) {}

  GgufValueType elem_type() const { return elem_; }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  // Element k as a value of its own (a copy); k < size().
  GgufValue operator[](size_t k) const;
  GgufValue front() const;
  GgufValue back() const;
  // Element k of a STRING array, as a view into this array; k < size().
  std::string_view string_at(size_t k) const;
  // Element k of an ARRAY array (an inner array), by reference; k < size().
  const GgufValue& array_at(size_t k) const;
  // Element k of a numeric or BOOL array; k < size().
  int64_t int_at(size_t k) const;     // integers and BOOL; throws Error for u64 above int64
  double float_at(size_t k) const;    // any numeric type

  // Appends e; throws Error when its type is not elem_type() or an integer does not fit it.
  void push_back(const GgufValue& e);
  void pop_back();
  void reserve(size_t n);
  // Bulk appends for the parser: `n` scalars of elem_type() in little-endian byte order, and
  // one STRING element.
  void append_scalars(const uint8_t* bytes, size_t n);
  void append_string(std::string_view s);

 private:
  GgufValueType elem_ = GgufValueType::UINT8;
  size_t n_ = 0;
  std::vector<uint8_t> scalars_;      // numeric and BOOL: n_ elements of their size
  std::string strings_;               // STRING: every element's bytes, concatenated
  std::vector<size_t> string_ends_;   // STRING: where each element ends in strings_
  std::vector<GgufValue> arrays_;     // ARRAY: the inner arrays
};

// Bytes one scalar element of `t` takes (0 for STRING and ARRAY).
size_t gguf_scalar_size(GgufValueType t);

// One metadata value. Scalars live in the union-like fields; arrays hold their elements
// (which may themselves be arrays).
struct GgufValue {
  GgufValueType type = GgufValueType::UINT8;
  uint64_t u = 0;       // UINT8/16/32/64, BOOL
  int64_t i = 0;        // INT8/16/32/64
  double f = 0.0;       // FLOAT32/64
  std::string s;        // STRING
  GgufArray arr;        // ARRAY: its element type and elements

  bool is_integer() const;
  bool is_float() const;
  // Numeric value as int64/double; throws Error on a non-numeric type.
  int64_t as_int() const;
  double as_float() const;
};

struct GgufKV {
  std::string key;
  GgufValue value;
};

struct GgufTensorInfo {
  std::string name;
  GgmlType type = GgmlType::F32;
  std::vector<int64_t> shape;   // ggml order: shape[0] is the row length (contiguous)
  uint64_t offset = 0;          // relative to the start of the data section
  uint64_t n_bytes = 0;
  const uint8_t* data = nullptr;  // points into the mapping (reader) or is null (writer model)
  int64_t n_elements() const;
};

class GgufFile {
 public:
  // Maps and parses the file. Throws FileError on any inconsistency.
  static GgufFile open(const std::string& path);
  // Parses a file image held in memory (fuzzing, tests, files built by GgufBuilder);
  // `name` stands for the path in error messages. Tensor data points into `bytes`.
  static GgufFile from_memory(std::shared_ptr<const std::vector<uint8_t>> bytes, std::string name);

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }   // absolute offset of the data section
  uint64_t file_size() const;

  const std::vector<GgufKV>& metadata() const { return kv_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufValue* find(std::string_view key) const;
  const GgufTensorInfo* find_tensor(std::string_view name) const;

  // Typed getters: throw FileError naming the key when the key is present with the wrong type.
  // The *_or variants return the fallback when the key is absent.
  std::string get_string(std::string_view key) const;              // throws when absent
  std::string get_string_or(std::string_view key, std::string fallback) const;
  int64_t get_int_or(std::string_view key, int64_t fallback) const;  // any integer type
  double get_float_or(std::string_view key, double fallback) const;  // any numeric type
  bool get_bool_or(std::string_view key, bool fallback) const;
  std::optional<int64_t> get_int(std::string_view key) const;
  std::vector<std::string> get_string_array(std::string_view key) const;  // empty when absent
  // The same as views into this file's metadata (valid while the GgufFile lives), no copies.
  std::vector<std::string_view> get_string_array_views(std::string_view key) const;
  std::vector<float> get_f32_array(std::string_view key) const;          // empty when absent
  std::vector<int32_t> get_i32_array(std::string_view key) const;        // empty when absent

 private:
  GgufFile() = default;
  friend class GgufParser;
  std::shared_ptr<MappedFile> map_;
  std::shared_ptr<const std::vector<uint8_t>> memory_;  // set instead of map_ by from_memory
  uint64_t file_size_ = 0;
  std::string path_;
  uint32_t version_ = 3;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<GgufKV> kv_;
  std::vector<GgufTensorInfo> tensors_;
};

}  // namespace llmctl
