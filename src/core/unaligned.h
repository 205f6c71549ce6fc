#pragma once
// A value of type T read from bytes at any alignment (file images, packed arrays), in host
// byte order; memcpy is what compilers turn into one plain load.
#include <cstdint>
#include <cstring>

namespace llmctl {

template <class T>
T load_unaligned(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace llmctl
