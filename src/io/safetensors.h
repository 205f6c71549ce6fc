#pragma once
// Safetensors reader over mmap (Hugging Face's tensor file format), validating like the GGUF
// reader: every length, offset and size from the file is checked before it is used, and a bad
// file throws FileError("PATH: WHAT (at byte N)"), never crashes.
//
// Layout:
//   u64 N (little-endian)   length of the header
//   N bytes                 UTF-8 JSON object:
//                             { "__metadata__": {"key": "value", ...},      (optional)
//                               "NAME": {"dtype": "F32", "shape": [d0, d1, ...],
//                                        "data_offsets": [BEGIN, END]}, ... }
//   the byte buffer         tensor NAME is bytes [BEGIN, END) of it, row-major (C order:
//                           shape.back() is contiguous), little-endian.
// llmctl reads F32, F16 and BF16 tensors; any other dtype is an error naming the tensor.
//
// A sharded checkpoint (several files) is listed by model.safetensors.index.json:
//   {"metadata": {...}, "weight_map": {"NAME": "model-00001-of-00002.safetensors", ...}}
// SafetensorsCheckpoint opens either form from a directory.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/ggml_type.h"
#include "core/mapped_file.h"

namespace llmctl {

// Limits beyond the format's own rules, so numbers in a file cannot drive memory use.
constexpr uint64_t kSafetensorsMaxHeader = 100'000'000;  // the safetensors library's own cap
constexpr uint32_t kSafetensorsMaxDepth = 8;             // JSON nesting (a valid header has 3)
constexpr uint64_t kSafetensorsMaxValues = 1ull << 22;   // JSON values in one header
constexpr uint32_t kSafetensorsMaxDims = 8;

struct SafetensorsTensor {
  std::string name;
  GgmlType type = GgmlType::F32;  // F32, F16 or BF16
  std::vector<int64_t> shape;     // as in the file (row-major: shape.back() contiguous);
                                  // ggml order is this reversed
  uint64_t begin = 0;             // data_offsets, relative to the byte buffer
  uint64_t end = 0;
  const uint8_t* data = nullptr;  // points into the mapping (or the memory image)
  int64_t n_elements() const;     // product of shape (1 for a scalar)
  uint64_t n_bytes() const { return end - begin; }
};

class SafetensorsFile {
 public:
  // Maps and parses the file. Throws FileError on any inconsistency.
  static SafetensorsFile open(const std::string& path);
  // Parses a file image held in memory (tests, fuzzing); `name` stands for the path in error
  // messages. Tensor data points into `bytes`.
  static SafetensorsFile from_memory(std::shared_ptr<const std::vector<uint8_t>> bytes,
                                     std::string name);

  const std::string& path() const { return path_; }
  uint64_t header_size() const { return header_size_; }  // N
  uint64_t data_offset() const { return 8 + header_size_; }
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }  // sorted by name
  const SafetensorsTensor* find(std::string_view name) const;
  // "__metadata__" (string -> string); empty when absent.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;
  void parse(const uint8_t* data, uint64_t size);
  std::shared_ptr<MappedFile> map_;  // shared: moving the file keeps tensor pointers valid
  std::shared_ptr<const std::vector<uint8_t>> memory_;
  std::string path_;
  uint64_t header_size_ = 0;
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

// The safetensors files of a Hugging Face model directory, looked up by tensor name.
class SafetensorsCheckpoint {
 public:
  // DIR/model.safetensors.index.json and the shards it names when the index exists, else
  // DIR/model.safetensors. Throws FileError for a bad index (not JSON, no weight_map, a
  // shard name that is not a plain file name, a tensor missing from its shard) or shard.
  static SafetensorsCheckpoint open_dir(const std::string& dir);
  // The same for files already parsed (tests): tensors are looked up in every file.
  static SafetensorsCheckpoint from_files(std::vector<SafetensorsFile> files);

  // The tensor and the file holding it; nullptr when absent.
  const SafetensorsTensor* find(std::string_view name,
                                const SafetensorsFile** file = nullptr) const;
  const std::vector<SafetensorsFile>& files() const { return files_; }
  // Where errors about a tensor should point: its shard, or the first file.
  const std::string& path_of(std::string_view name) const;

 private:
  std::vector<SafetensorsFile> files_;
  std::map<std::string, size_t, std::less<>> index_;  // tensor name -> files_ index
};

}  // namespace llmctl
