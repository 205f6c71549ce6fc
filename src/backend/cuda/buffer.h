#pragma once
// DeviceBuffer: owned device memory (cudaMalloc), move-only. The minimal allocation type the
// CUDA backend builds on; the Backend's buffer handles will wrap it.

#include <cstddef>

namespace llmctl::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // Allocates `bytes` on the current device (256-byte aligned); throws llmctl::Error on failure.
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() { return data_; }
  const void* data() const { return data_; }
  template <class T>
  T* as() {
    return static_cast<T*>(data_);
  }
  template <class T>
  const T* as() const {
    return static_cast<const T*>(data_);
  }
  size_t size() const { return size_; }

  // Synchronous copies between host memory and [offset, offset + bytes) of this buffer; the
  // range is checked against size().
  void upload(const void* src, size_t bytes, size_t offset = 0);
  void download(void* dst, size_t bytes, size_t offset = 0) const;

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace llmctl::cuda
