// MXFP4 encoder: ggml's quantize_row_mxfp4_ref (ggml/src/ggml-quants.c), operation for
// operation, so the bytes are llama.cpp's. Per 32-element block:
//   amax = max |x|;  e = amax > 0 ? (uint8) (floor(log2f(amax)) - 2 + 127) : 0
//   so h(e) = 2^(e - 128) = 2^(floor(log2 amax) - 3) and the top level 12 h lies in
//   (0.75 amax, 1.5 amax]: larger elements clip to +-12 h. log2f rounds up to the next
//   integer just below a power of two; ggml's bytes keep that, and we call the same log2f.
//   every element: the first of the 16 levels v (kMxfp4Values) with the least |v * h(e) - x|.
// ggml ignores an importance matrix for MXFP4 (quantize_mxfp4 never reads it), and so do we.
#include <cmath>
#include <cstdint>

#include "quant/dequant.h"
#include "quant/quantize_blocks.h"

namespace llmctl::quant_detail {

namespace {

// ggml's C cast (uint8_t) of a float, as x86 compilers emit it: truncation to int32
// (cvttss2si, which gives INT32_MIN out of range) and its low byte. ggml reaches values out
// of 0..255 only for amax < 2^-125 (e would be negative: it wraps to a huge scale, the
// bytes llama.cpp writes); the quantizer's callers reject Inf and NaN before.
uint8_t c_cast_u8(float f) {
  if (!(f > -2147483648.0f && f < 2147483648.0f)) return 0;
  return static_cast<uint8_t>(static_cast<uint32_t>(static_cast<int32_t>(f)) & 0xffu);
}

// ggml's best_index_mxfp4: the first index of least error.
uint8_t best_index(float x, float d) {
  int best = 0;
  float best_err = std::fabs(static_cast<float>(kMxfp4Values[0]) * d - x);
  for (int i = 1; i < 16; ++i) {
    const float err = std::fabs(static_cast<float>(kMxfp4Values[i]) * d - x);
    if (err < best_err) {
      best = i;
      best_err = err;
    }
  }
  return static_cast<uint8_t>(best);
}

}  // namespace

void quantize_block_mxfp4(const float* x, uint8_t* out) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j)
    if (amax < std::fabs(x[j])) amax = std::fabs(x[j]);
  const uint8_t e = amax > 0.0f ? c_cast_u8(std::floor(std::log2(amax)) - 2.0f + 127.0f) : 0;
  const float d = e8m0_half_to_f32(e);
  out[0] = e;
  for (int j = 0; j < 16; ++j)
    out[1 + j] = static_cast<uint8_t>(best_index(x[j], d) | (best_index(x[j + 16], d) << 4));
}

}  // namespace llmctl::quant_detail
