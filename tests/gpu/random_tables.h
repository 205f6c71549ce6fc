#pragma once
// Random weight tables for the get_rows tests (test_gpu, test_kernel_math): every scale and
// value is a finite number (subnormals included), so exact comparisons are meaningful.

#include <cstdint>
#include <random>
#include <vector>

#include "core/ggml_type.h"

namespace llmctl::test {

// A random 16-bit fp16 pattern that is finite (exponent field != 31).
inline uint16_t random_finite_fp16(std::mt19937_64& rng) {
  uint16_t h = static_cast<uint16_t>(rng());
  if ((h & 0x7c00u) == 0x7c00u) h = static_cast<uint16_t>(h & ~0x4000u);
  return h;
}

// `n_rows * row_len` elements of `type` (F32, F16, BF16, Q8_0, Q4_0, Q4_1, MXFP4) as raw bytes.
inline std::vector<uint8_t> random_table(GgmlType type, int64_t n_rows, int64_t row_len,
                                         uint64_t seed) {
  std::mt19937_64 rng(seed);
  const GgmlTypeTraits t = ggml_traits(type);
  const size_t n_blocks = static_cast<size_t>(n_rows * row_len / t.block_size);
  std::vector<uint8_t> bytes(n_blocks * t.type_size);
  auto put16 = [&bytes](size_t at, uint16_t v) {
    bytes[at] = static_cast<uint8_t>(v & 0xffu);
    bytes[at + 1] = static_cast<uint8_t>(v >> 8);
  };
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  for (size_t i = 0; i < n_blocks; ++i) {
    const size_t at = i * t.type_size;
    switch (type) {
      case GgmlType::F32: {
        // exponent field != 255; byte 3 holds sign + 7 exponent bits, byte 2 the last one
        if ((bytes[at + 3] & 0x7fu) == 0x7fu && (bytes[at + 2] & 0x80u) != 0)
          bytes[at + 3] = static_cast<uint8_t>(bytes[at + 3] & 0xbfu);
        break;
      }
      case GgmlType::BF16:
        if ((bytes[at + 1] & 0x7fu) == 0x7fu && (bytes[at] & 0x80u) != 0)
          bytes[at + 1] = static_cast<uint8_t>(bytes[at + 1] & 0xbfu);
        break;
      case GgmlType::F16:
      case GgmlType::Q8_0:
      case GgmlType::Q4_0:
        put16(at, random_finite_fp16(rng));  // the value (F16) or the scale d
        break;
      case GgmlType::Q4_1:
        put16(at, random_finite_fp16(rng));      // d
        put16(at + 2, random_finite_fp16(rng));  // m
        break;
      case GgmlType::MXFP4:  // E8M0 e <= 252: 12 * 2^(e - 128) stays finite
        bytes[at] = static_cast<uint8_t>(bytes[at] % 253u);
        break;
      default:
        break;
    }
  }
  return bytes;
}

// Ids in [0, n_rows): the first and last row, a repeat, then random rows.
inline std::vector<int32_t> random_ids(int64_t n_ids, int64_t n_rows, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> ids(static_cast<size_t>(n_ids));
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i == 0)
      ids[i] = static_cast<int32_t>(n_rows - 1);
    else if (i == 1)
      ids[i] = 0;
    else if (i == 2)
      ids[i] = ids[0];
    else
      ids[i] = static_cast<int32_t>(rng() % static_cast<uint64_t>(n_rows));
  }
  return ids;
}

}  // namespace llmctl::test
