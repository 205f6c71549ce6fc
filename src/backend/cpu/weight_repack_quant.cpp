// The 16-row Q4_0 and Q8_0 records of weight_repack.h (layout there): plain byte copies from the
// GGUF blocks (Q8_0's quants moved to unsigned bytes), one group at a time.
#include <cstring>

#include "backend/cpu/weight_repack.h"

namespace llmctl::cpu {

void repack_group_q16(GgmlType type, const uint8_t* const rows[16], int64_t n_blocks,
                      uint8_t* dst) {
  const bool q8 = type == GgmlType::Q8_0;
  const size_t block = q8 ? 34 : 18, rec = q8 ? kQ8_0RecordBytes : kQ4_0RecordBytes;
  const int vectors = q8 ? 8 : 4;  // 64-byte vectors of 4 bytes per row
  for (int64_t b = 0; b < n_blocks; ++b) {
    uint8_t* out = dst + static_cast<size_t>(b) * rec;
    for (int r = 0; r < 16; ++r) {
      const uint8_t* blk = rows[r] + static_cast<size_t>(b) * block;
      std::memcpy(out + 2 * r, blk, 2);  // fp16 d
      for (int v = 0; v < vectors; ++v) {
        uint8_t* lane = out + 32 + 64 * v + 4 * r;
        std::memcpy(lane, blk + 2 + 4 * v, 4);
        if (q8)  // int8 q to q + 128 as an unsigned byte: the sign bit flipped
          for (int j = 0; j < 4; ++j) lane[j] ^= 0x80;
      }
    }
  }
}

}  // namespace llmctl::cpu
