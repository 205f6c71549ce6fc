#pragma once
// GGUF v3 writer: collect metadata and tensors in a GgufBuilder, then build() the file image
// or write() it. Tensor data is placed in insertion order, each tensor padded to the
// alignment (general.alignment when set, else 32), like ggml and gguf-py do.

#include <cstdint>
#include <string>
#include <vector>

#include "core/ggml_type.h"
#include "io/gguf.h"

namespace llmctl {

// Metadata value constructors.
namespace gguf_value {
GgufValue u8(uint8_t v);
GgufValue i8(int8_t v);
GgufValue u16(uint16_t v);
GgufValue i16(int16_t v);
GgufValue u32(uint32_t v);
GgufValue i32(int32_t v);
GgufValue u64(uint64_t v);
GgufValue i64(int64_t v);
GgufValue f32(float v);
GgufValue f64(double v);
GgufValue boolean(bool v);
GgufValue string(std::string v);
// Every element must have type `elem` (an ARRAY element is itself an array).
GgufValue array(GgufValueType elem, std::vector<GgufValue> elems);
GgufValue string_array(const std::vector<std::string>& v);
GgufValue f32_array(const std::vector<float>& v);
GgufValue i32_array(const std::vector<int32_t>& v);
}  // namespace gguf_value

class GgufBuilder {
 public:
  struct Tensor {
    std::string name;
    GgmlType type = GgmlType::F32;
    std::vector<int64_t> shape;  // ggml order, shape[0] contiguous
    std::vector<uint8_t> bytes;
  };

  // Sets a key; a key set twice keeps its first position and takes the new value.
  GgufBuilder& set(std::string key, GgufValue value);
  // Adds a tensor. Throws Error on a duplicate name, a bad shape or a byte count that
  // does not match type and shape.
  GgufBuilder& add_tensor(std::string name, GgmlType type, std::vector<int64_t> shape,
                          std::vector<uint8_t> bytes);

  const std::vector<GgufKV>& metadata() const { return kv_; }
  const std::vector<Tensor>& tensors() const { return tensors_; }
  // general.alignment when set, else 32. Throws Error when it is not a u32 power of two.
  uint64_t alignment() const;

  // The complete v3 file image. Throws Error on an inconsistent value (e.g. an array
  // element whose type differs from the array's element type).
  std::vector<uint8_t> build() const;
  // Writes build() to `path`; throws FileError when the file cannot be written.
  void write(const std::string& path) const;

  // Everything in `file` (metadata in order, tensors with their bytes), for rewriting it.
  static GgufBuilder from_file(const GgufFile& file);

 private:
  std::vector<GgufKV> kv_;
  std::vector<Tensor> tensors_;
};

}  // namespace llmctl
