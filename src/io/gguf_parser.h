#pragma once
// Internal to src/io: the GGUF parser behind GgufFile::open and GgufFile::from_memory.

#include <cstdint>

#include "io/gguf.h"

namespace llmctl {

class GgufParser {
 public:
  // Parses the image [data, data + size) into `out` (whose path_ names it in errors).
  // Tensor data pointers point into the image, which the caller keeps alive in `out`.
  static void parse(GgufFile& out, const uint8_t* data, uint64_t size);
};

}  // namespace llmctl
