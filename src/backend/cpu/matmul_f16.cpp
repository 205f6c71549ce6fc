// F16 and BF16 weights: the float tile (matmul_float_tile.h) widening with hardware
// conversions (F16C vcvtph2ps; BF16 is the top half of a float: zero-extend and shift).
// Both widenings are exact, so the scalar loaders (core/fp16.h) give the same floats.
#include <cstring>

#include "backend/cpu/matmul_float_tile.h"
#include "backend/cpu/matmul_float_tile_avx512.h"
#include "core/fp16.h"

namespace llmctl::cpu {

namespace {

uint16_t load_u16(const uint8_t* row, int64_t i) {
  uint16_t h;
  std::memcpy(&h, row + static_cast<size_t>(i) * 2, sizeof h);
  return h;
}

#if defined(LLMCTL_HAVE_X86)
LLMCTL_AVX2 inline __m128i load_halves_tail(const uint8_t* row, int64_t i, int64_t m) {
  uint16_t buf[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::memcpy(buf, row + static_cast<size_t>(i) * 2, static_cast<size_t>(m) * 2);
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(buf));
}
LLMCTL_AVX2 inline __m128i load_halves(const uint8_t* row, int64_t i) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + static_cast<size_t>(i) * 2));
}
#endif

// The two 16-bit formats: exact widening, scalar and 8 at a time.
struct F16Bits {
  static float to_f32(uint16_t h) { return fp16_to_f32(h); }
#if defined(LLMCTL_HAVE_X86)
  LLMCTL_AVX2 static __m256 widen(__m128i h) { return _mm256_cvtph_ps(h); }
#endif
};

struct Bf16Bits {
  static float to_f32(uint16_t h) { return bf16_to_f32(h); }
#if defined(LLMCTL_HAVE_X86)
  LLMCTL_AVX2 static __m256 widen(__m128i h) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
#endif
};

template <class Bits>
struct LoadHalf {
  static constexpr size_t kElemBytes = 2;
  static float load1(const uint8_t* row, int64_t i) { return Bits::to_f32(load_u16(row, i)); }
#if defined(LLMCTL_HAVE_X86)
  LLMCTL_AVX2 static __m256 load8(const uint8_t* row, int64_t i) {
    return Bits::widen(load_halves(row, i));
  }
  LLMCTL_AVX2 static __m256 load_tail(const uint8_t* row, int64_t i, int64_t m) {
    return Bits::widen(load_halves_tail(row, i, m));
  }
#endif
};

}  // namespace

MatmulKernel matmul_kernel_f16(bool avx2) {
  return make_float_kernel<LoadHalf<F16Bits>>(avx2, "f16 avx2", "f16 scalar",
                                              /*half_activations=*/true);
}

MatmulKernel matmul_kernel_bf16(bool avx2) {
  return make_float_kernel<LoadHalf<Bf16Bits>>(avx2, "bf16 avx2", "bf16 scalar");
}

MatmulKernel matmul_kernel_f16_avx512() {
  return make_float_kernel_avx512<LoadHalf<F16Bits>>("f16 avx512", /*half_activations=*/true);
}

MatmulKernel matmul_kernel_bf16_avx512() {
  return make_float_kernel_avx512<LoadHalf<Bf16Bits>>("bf16 avx512");
}

}  // namespace llmctl::cpu
