#pragma once
// A read-only memory mapping of a whole file. Empty files map to size 0 and data nullptr.

#include <cstddef>
#include <cstdint>
#include <string>

namespace llmctl {

class MappedFile {
 public:
  // Throws FileError when the file cannot be opened or mapped.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  void release() noexcept;
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// Whether [p, p + bytes) lies in one read-only mapping of a file (as MappedFile's), by
// /proc/self/maps: its pages hold the file's bytes and nothing else, so they can be dropped from
// this process and read back from the file (MADV_DONTNEED). False where that cannot be told.
bool in_read_only_file_mapping(const void* p, size_t bytes);

}  // namespace llmctl
