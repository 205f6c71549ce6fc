#pragma once
// Backend buffers from and to host vectors, for the op tests.
#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace llmctl::test {

inline Buffer make(Backend& b, const std::vector<float>& v) {
  Buffer buf = b.alloc(static_cast<int64_t>(v.size()));
  b.upload(buf, v.data(), static_cast<int64_t>(v.size()));
  return buf;
}

inline Buffer make_ids(Backend& b, const std::vector<int32_t>& v) {
  Buffer buf = b.alloc(static_cast<int64_t>(v.size()), BufferType::I32);
  b.upload(buf, v.data(), static_cast<int64_t>(v.size()));
  return buf;
}

// The whole buffer (as many floats as it holds).
inline std::vector<float> read(Backend& b, const Buffer& buf) {
  std::vector<float> v(static_cast<size_t>(buf.size()));
  b.download(buf, v.data(), buf.size());
  return v;
}

}  // namespace llmctl::test
