#pragma once
// Buffer: an array in a backend's memory (part of the seam, backend.h; defined in
// backend.cpp). Host memory on the CPU backend, device memory on CUDA: only a CPU backend may
// dereference raw() on the host.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>

namespace llmctl {

// ---------------------------------------------------------------------------
// Buffer: an array in the backend's memory (f32 activations, KV pages, i32 indices)
// ---------------------------------------------------------------------------
// Q8_0 and Q4_0 hold KV pages only, in ggml's block layouts (quant/dequant.h): 32 values per
// block, block_q8_0 34 bytes (fp16 d, int8 qs[32]), block_q4_0 18 bytes (fp16 d, 16 bytes of
// nibbles). A block buffer's size() still counts values, a multiple of 32.
enum class BufferType : uint8_t { F32, F16, I32, Q8_0, Q4_0 };
const char* buffer_type_name(BufferType t);
// Bytes per element of an element type (F32, F16, I32); asserts on a block type.
size_t buffer_type_size(BufferType t);
// Values per block: 32 for Q8_0 and Q4_0, else 1; and the bytes of one block.
int64_t buffer_block_elems(BufferType t);
size_t buffer_block_bytes(BufferType t);
inline bool buffer_type_is_block(BufferType t) { return buffer_block_elems(t) > 1; }
// Bytes of n values (n a multiple of buffer_block_elems(t)).
size_t buffer_bytes(BufferType t, int64_t n);

class Buffer {
 public:
  Buffer() = default;
  Buffer(void* data, int64_t size, BufferType type, std::function<void(void*)> free_fn)
      : data_(data), size_(size), type_(type), free_(std::move(free_fn)) {}
  ~Buffer() { reset(); }
  Buffer(Buffer&& o) noexcept
      : data_(o.data_), size_(o.size_), type_(o.type_), free_(std::move(o.free_)) {
    o.data_ = nullptr;
    o.size_ = 0;
    o.free_ = nullptr;
  }
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      reset();
      data_ = o.data_;
      size_ = o.size_;
      type_ = o.type_;
      free_ = std::move(o.free_);
      o.data_ = nullptr;
      o.size_ = 0;
      o.free_ = nullptr;
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  // Addresses in the backend's memory space: only a CPU backend may dereference them on the
  // host. The typed accessors assert the element type.
  void* raw() const { return data_; }
  float* data() const { return typed<float>(BufferType::F32); }
  uint16_t* f16() const { return typed<uint16_t>(BufferType::F16); }
  int32_t* i32() const { return typed<int32_t>(BufferType::I32); }
  int64_t size() const { return size_; }  // elements
  BufferType type() const { return type_; }

 private:
  template <typename T>
  T* typed(BufferType want) const {
    if (data_ != nullptr && type_ != want) type_mismatch(want);
    return static_cast<T*>(data_);
  }
  [[noreturn]] void type_mismatch(BufferType want) const;
  void reset() noexcept {
    if (free_ && data_ != nullptr) free_(data_);
    data_ = nullptr;
    size_ = 0;
  }
  void* data_ = nullptr;
  int64_t size_ = 0;
  BufferType type_ = BufferType::F32;
  std::function<void(void*)> free_;
};

}  // namespace llmctl
