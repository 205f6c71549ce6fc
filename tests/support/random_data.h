#pragma once
// Random test inputs shared by the CPU backend tests.

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "core/fp16.h"
#include "core/ggml_type.h"

namespace llmctl::test {

// n draws of N(0, scale^2) from rng.
inline std::vector<float> random_floats(std::mt19937& rng, size_t n, float scale = 1.0f) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Byte offsets of the fp16 scales in a block of the types quantize_row does not write
// (layouts: quant/dequant.h).
inline std::vector<size_t> block_half_offsets(GgmlType t) {
  if (t == GgmlType::Q2_K) return {80, 82};  // d, dmin
  if (t == GgmlType::Q3_K) return {108};
  return {0};  // IQ4_NL, IQ4_XS: d
}

// Blocks of such a type for n elements: random bytes, each fp16 scale a random
// +-[0.002, 0.02] (so the values, small integers times the scales, stay small and normal).
inline std::vector<uint8_t> random_blocks(GgmlType type, size_t n, std::mt19937& rng) {
  const GgmlTypeTraits tr = ggml_traits(type);
  std::vector<uint8_t> bytes(n / tr.block_size * tr.type_size);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> mag(0.002f, 0.02f);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(byte(rng));
  for (size_t blk = 0; blk < bytes.size(); blk += tr.type_size)
    for (size_t off : block_half_offsets(type)) {
      const uint16_t h = f32_to_fp16(byte(rng) < 128 ? mag(rng) : -mag(rng));
      bytes[blk + off] = static_cast<uint8_t>(h & 0xff);
      bytes[blk + off + 1] = static_cast<uint8_t>(h >> 8);
    }
  return bytes;
}

}  // namespace llmctl::test
