#pragma once
// Test helpers for GGUF: a little-endian byte writer to hand-build (malformed) files, and a
// parse-and-expect-FileError helper. Shared by the GGUF test files.

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "io/gguf.h"

namespace llmctl::test {

struct Bytes {
  std::vector<uint8_t> b;

  size_t size() const { return b.size(); }
  template <class T>
  Bytes& put(T v) {
    const size_t at = b.size();
    b.resize(at + sizeof v);
    std::memcpy(b.data() + at, &v, sizeof v);
    return *this;
  }
  Bytes& u8(uint8_t v) { return put(v); }
  Bytes& u32(uint32_t v) { return put(v); }
  Bytes& u64(uint64_t v) { return put(v); }
  Bytes& i64(int64_t v) { return put(v); }
  Bytes& f32(float v) { return put(v); }
  Bytes& raw(std::string_view s) {
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& str(std::string_view s) { return u64(s.size()).raw(s); }
  Bytes& zeros(size_t n) {
    b.insert(b.end(), n, uint8_t{0});
    return *this;
  }
  Bytes& pad_to(size_t alignment) {
    while (b.size() % alignment != 0) b.push_back(0);
    return *this;
  }
  // "GGUF", version, tensor count, kv count: 24 bytes.
  Bytes& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    return raw("GGUF").u32(version).u64(n_tensors).u64(n_kv);
  }
  Bytes& kv_u32(std::string_view key, uint32_t v) {
    return str(key).u32(static_cast<uint32_t>(GgufValueType::UINT32)).u32(v);
  }
  Bytes& kv_string(std::string_view key, std::string_view v) {
    return str(key).u32(static_cast<uint32_t>(GgufValueType::STRING)).str(v);
  }
  // Tensor info: name, n_dims, dims, type, offset.
  Bytes& tensor(std::string_view name, const std::vector<int64_t>& dims, uint32_t type, uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(dims.size()));
    for (const int64_t d : dims) i64(d);
    return u32(type).u64(offset);
  }
};

inline GgufFile parse_bytes(const std::vector<uint8_t>& bytes, const std::string& name = "test.gguf") {
  return GgufFile::from_memory(std::make_shared<const std::vector<uint8_t>>(bytes), name);
}

// Parses `bytes`, which must fail with a FileError (not any other exception, not success);
// returns the error so the caller can check its message and offset.
inline FileError parse_error(const std::vector<uint8_t>& bytes) {
  try {
    (void)parse_bytes(bytes);
  } catch (const FileError& e) {
    return e;
  } catch (const std::exception& e) {
    FAIL("expected FileError, got another exception: " << e.what());
  }
  FAIL("expected FileError, but the file parsed");
  throw std::logic_error("unreachable");
}

}  // namespace llmctl::test
