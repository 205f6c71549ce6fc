// f32_to_f16_fast (f16_store_fast.h): vcvtps2ph, with f32_to_fp16 for groups holding a NaN.
#include "backend/cpu/f16_store_fast.h"

#include <immintrin.h>

#include "core/fp16.h"

namespace llmctl::cpu {

__attribute__((target("avx2,fma,f16c"))) void f32_to_f16_fast(const float* x, int64_t n,
                                                              uint16_t* h) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)) != 0) {
      for (int64_t j = i; j < i + 8; ++j) h[j] = f32_to_fp16(x[j]);
      continue;
    }
    // imm 0: round to nearest even (not MXCSR's mode, which a caller could have changed)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(h + i), _mm256_cvtps_ph(v, 0));
  }
  for (; i < n; ++i) h[i] = f32_to_fp16(x[i]);
}

}  // namespace llmctl::cpu
