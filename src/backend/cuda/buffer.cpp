#include "backend/cuda/buffer.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <utility>

#include "backend/cuda/check.h"
#include "core/error.h"

namespace llmctl::cuda {

namespace {

void check_range(const char* what, size_t bytes, size_t offset, size_t size) {
  if (offset > size || bytes > size - offset)
    throw Error(fmt::format("DeviceBuffer::{}: range [{}, {}) exceeds the buffer size {}", what,
                            offset, offset + bytes, size));
}

}  // namespace

DeviceBuffer::DeviceBuffer(size_t bytes) : size_(bytes) {
  if (bytes > 0) LLMCTL_CUDA_CHECK(cudaMalloc(&data_, bytes));
}

DeviceBuffer::~DeviceBuffer() {
  // A destructor must not throw; a failing cudaFree means the context is already broken and
  // the next checked call reports it.
  if (data_ != nullptr) cudaFree(data_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void DeviceBuffer::upload(const void* src, size_t bytes, size_t offset) {
  check_range("upload", bytes, offset, size_);
  if (bytes == 0) return;
  LLMCTL_CUDA_CHECK(
      cudaMemcpy(static_cast<char*>(data_) + offset, src, bytes, cudaMemcpyHostToDevice));
}

void DeviceBuffer::download(void* dst, size_t bytes, size_t offset) const {
  check_range("download", bytes, offset, size_);
  if (bytes == 0) return;
  LLMCTL_CUDA_CHECK(
      cudaMemcpy(dst, static_cast<const char*>(data_) + offset, bytes, cudaMemcpyDeviceToHost));
}

}  // namespace llmctl::cuda
