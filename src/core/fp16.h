#pragma once
// IEEE half (fp16) and bfloat16 <-> float conversions: exact widening, round-to-nearest-even
// narrowing, NaN kept NaN. Header-only plain C++ (bit manipulation, no intrinsics) so the
// same functions can later be marked __host__ __device__ for the CUDA kernels.

#include <cstdint>
#include <cstring>

namespace llmctl {

inline float bits_to_f32(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline uint32_t f32_to_bits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

// fp16 -> float. Every half is exactly representable as a float, subnormals included.
inline float fp16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return bits_to_f32(sign | 0x7f800000u | (mant << 13));  // inf / NaN
  if (exp != 0) return bits_to_f32(sign | ((exp + 112u) << 23) | (mant << 13));
  if (mant == 0) return bits_to_f32(sign);  // +-0
  // Subnormal: shift the mantissa up until its leading 1 reaches the implicit bit.
  uint32_t e = 113;  // exponent of 2^-14 in float bias, before normalising
  while ((mant & 0x400u) == 0) {
    mant <<= 1;
    --e;
  }
  return bits_to_f32(sign | (e << 23) | ((mant & 0x3ffu) << 13));
}

// float -> fp16, round to nearest even; overflow gives inf, NaN stays a (quiet) NaN.
inline uint16_t f32_to_fp16(float f) {
  const uint32_t x = f32_to_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t exp = (x >> 23) & 0xffu;
  const uint32_t mant = x & 0x7fffffu;
  if (exp == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mant != 0 ? 0x200u : 0u));
  const int32_t e = static_cast<int32_t>(exp) - 127 + 15;  // rebiased exponent
  if (e >= 0x1f) return static_cast<uint16_t>(sign | 0x7c00u);
  if (e <= 0) {
    // Result is subnormal or zero: value = m * 2^(e-1-10+...) -> shift the 24-bit significand.
    if (e < -10) return static_cast<uint16_t>(sign);  // below half the smallest subnormal
    const uint32_t sig = mant | 0x800000u;
    const uint32_t shift = static_cast<uint32_t>(14 - e);  // 14..24
    uint32_t half = sig >> shift;
    const uint32_t rem = sig & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (half & 1u) != 0)) ++half;
    return static_cast<uint16_t>(sign | half);  // a carry into bit 10 becomes the smallest normal
  }
  uint32_t half = (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u) != 0)) ++half;  // may carry into inf: correct
  return static_cast<uint16_t>(sign | half);
}

// bfloat16 is the top half of a float: widening is a shift.
inline float bf16_to_f32(uint16_t b) { return bits_to_f32(static_cast<uint32_t>(b) << 16); }

// float -> bfloat16, round to nearest even; NaN stays a quiet NaN.
inline uint16_t f32_to_bf16(float f) {
  const uint32_t x = f32_to_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  const uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

}  // namespace llmctl
