// The 16-row records of the 32-element block types (weight_repack.h, layout there): byte copies
// from the GGUF blocks (Q8_0's quants moved to unsigned bytes, Q5's fifth bits sorted by step),
// one group at a time.
#include <cstring>

#include "backend/cpu/weight_repack.h"

namespace llmctl::cpu {

void repack_group_q16(const Q16Record& rec, size_t block_bytes, const uint8_t* const rows[16],
                      int64_t n_blocks, uint8_t* dst) {
  const bool has_min = rec.has_min, high_bit = rec.high_bit, nibbles = rec.nibbles;
  // the GGUF block: fp16 d (MXFP4: an E8M0 byte), fp16 m (Q4_1, Q5_1), u32 qh (Q5_0, Q5_1),
  // then the quants
  const size_t ds = rec.scale_bytes();
  const size_t src_qh = ds + (has_min ? 2 : 0), src_q = src_qh + (high_bit ? 4 : 0);
  const size_t vectors = nibbles ? 4 : 8;  // 64-byte vectors of 4 bytes per row
  for (int64_t b = 0; b < n_blocks; ++b) {
    uint8_t* out = dst + static_cast<size_t>(b) * rec.bytes;
    for (size_t r = 0; r < 16; ++r) {
      const uint8_t* blk = rows[r] + static_cast<size_t>(b) * block_bytes;
      std::memcpy(out + rec.d + ds * r, blk, ds);
      if (has_min) std::memcpy(out + rec.m + 2 * r, blk + 2, 2);
      if (high_bit) {  // bit s of byte i: the fifth bit of weight 4 s + i
        uint32_t qh = 0;  // little-endian
        for (size_t i = 0; i < 4; ++i) qh |= static_cast<uint32_t>(blk[src_qh + i]) << (8 * i);
        for (size_t i = 0; i < 4; ++i) {
          unsigned byte = 0;
          for (size_t s = 0; s < 8; ++s) byte |= ((qh >> (4 * s + i)) & 1u) << s;
          out[rec.qh + 4 * r + i] = static_cast<uint8_t>(byte);
        }
      }
      for (size_t v = 0; v < vectors; ++v) {
        uint8_t* lane = out + rec.q + 64 * v + 4 * r;
        std::memcpy(lane, blk + src_q + 4 * v, 4);
        if (!nibbles)  // int8 q to q + 128 as an unsigned byte: the sign bit flipped
          for (int j = 0; j < 4; ++j) lane[j] ^= 0x80;
      }
    }
  }
}

}  // namespace llmctl::cpu
