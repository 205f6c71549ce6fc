#pragma once
// f32 -> f16 rows for the fast CPU backend's F16 KV cache, 8 lanes at a time (F16C): the same
// bits as core/fp16.h's f32_to_fp16 for every input. vcvtps2ph rounds to nearest even and
// gives inf on overflow as f32_to_fp16 does, but keeps a NaN's payload where f32_to_fp16 gives
// the one quiet NaN 0x7e00 (with its sign), so a group of 8 holding a NaN is converted by
// f32_to_fp16 itself. Only on a CPU with AVX2, FMA and F16C (attention_fast_available()).

#include <cstdint>

namespace llmctl::cpu {

// h[i] = f32_to_fp16(x[i]) for i in [0, n).
void f32_to_f16_fast(const float* x, int64_t n, uint16_t* h);

}  // namespace llmctl::cpu
