#include "quant/quantize.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "core/fp16.h"

namespace llmctl {
namespace {

void store_u16_le(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v & 0xffu);
  p[1] = static_cast<uint8_t>(v >> 8);
}

// a * b rounded to float, in a way no compiler may fuse with the add that follows. ggml's
// reference bytes are defined by separately rounded multiply and add; an FMA (what GCC emits
// for `x * id + 8.5f` with -ffp-contract=fast and -march=haswell or later, clang with
// -ffp-contract=on, nvcc by default) skips one rounding and changes some nibbles (fixture case
// q4_0_fma_sensitive). A cast through double is not enough: GCC folds it back to a float
// multiply and then fuses it. A volatile float must hold the rounded value, so it is a real
// barrier; it costs a store and a load per element, which a reference path can afford.
// (A CUDA port would use __fmul_rn, which nvcc never contracts.)
float mul_rounded(float a, float b) {
  volatile float p = a * b;
  return p;
}

// (int8_t)v as ggml's C reference computes it: truncation toward zero. Non-finite or
// out-of-range values are undefined behaviour in C; x86 produces 0 for them and so do we.
int trunc_to_int8(float v) {
  if (!(v > -129.0f && v < 128.0f)) return 0;
  return static_cast<int>(v);
}

// 1/d, or 0 when d is zero (either sign).
float inverse_or_zero(float d) { return d != 0.0f ? 1.0f / d : 0.0f; }

void quantize_block_q8_0(const float* x, uint8_t* out) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = inverse_or_zero(d);
  store_u16_le(out, f32_to_fp16(d));
  for (int j = 0; j < 32; ++j) {
    const float q = std::round(mul_rounded(x[j], id));  // ties away from zero, like roundf
    const auto qi = static_cast<int8_t>(trunc_to_int8(q));
    std::memcpy(out + 2 + j, &qi, 1);
  }
}

// q = min(15, (int8)(v + bias)) as an unsigned nibble (a negative value cannot occur for
// finite inputs: v >= -8 - rounding for Q4_0, v >= 0 for Q4_1).
uint8_t nibble(float v, float bias) {
  const int q = trunc_to_int8(v + bias);
  return static_cast<uint8_t>((q < 15 ? q : 15) & 0xff);
}

void quantize_block_q4_0(const float* x, uint8_t* out) {
  float amax = 0.0f;
  float max = 0.0f;
  for (int j = 0; j < 32; ++j) {
    if (amax < std::fabs(x[j])) {  // strict: the first of equal magnitudes wins
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  const float d = max / -8.0f;
  const float id = inverse_or_zero(d);
  store_u16_le(out, f32_to_fp16(d));
  for (int j = 0; j < 16; ++j) {
    const uint8_t lo = nibble(mul_rounded(x[j], id), 8.5f);
    const uint8_t hi = nibble(mul_rounded(x[j + 16], id), 8.5f);
    out[2 + j] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

void quantize_block_q4_1(const float* x, uint8_t* out) {
  float min = std::numeric_limits<float>::max();
  float max = -std::numeric_limits<float>::max();
  for (int j = 0; j < 32; ++j) {
    if (x[j] < min) min = x[j];
    if (x[j] > max) max = x[j];
  }
  const float d = (max - min) / 15.0f;
  const float id = inverse_or_zero(d);
  store_u16_le(out, f32_to_fp16(d));
  store_u16_le(out + 2, f32_to_fp16(min));
  for (int j = 0; j < 16; ++j) {
    const uint8_t lo = nibble(mul_rounded(x[j] - min, id), 0.5f);
    const uint8_t hi = nibble(mul_rounded(x[j + 16] - min, id), 0.5f);
    out[4 + j] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

// Index of the first NaN or Inf in src[0..n), or -1.
int64_t first_non_finite(const float* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(src[i])) return i;
  return -1;
}

GgmlTypeTraits checked_traits(GgmlType type, int64_t n) {
  if (!can_quantize(type))
    throw Error(
        fmt::format("quantize: type {} is not supported (supported: F32, F16, BF16, Q8_0, "
                    "Q4_0, Q4_1)",
                    ggml_type_name(type)));
  const GgmlTypeTraits tr = ggml_traits(type);
  if (n < 0 || n % tr.block_size != 0)
    throw Error(fmt::format("quantize: {} elements is not a whole number of {} blocks of {}", n,
                            tr.name, tr.block_size),
                "pad the row or pick a type whose block size divides it (F16, BF16, F32)");
  return tr;
}

// Encodes after all checks have passed.
void encode(GgmlType type, const GgmlTypeTraits& tr, const float* src, uint8_t* p, size_t count) {
  switch (type) {
    case GgmlType::F32:
      if (count > 0) std::memcpy(p, src, count * sizeof(float));
      break;
    case GgmlType::F16:
      for (size_t i = 0; i < count; ++i) store_u16_le(p + 2 * i, f32_to_fp16(src[i]));
      break;
    case GgmlType::BF16:
      for (size_t i = 0; i < count; ++i) store_u16_le(p + 2 * i, f32_to_bf16(src[i]));
      break;
    default: {
      const size_t blocks = count / tr.block_size;
      for (size_t b = 0; b < blocks; ++b) {
        const float* x = src + b * tr.block_size;
        uint8_t* out = p + b * tr.type_size;
        if (type == GgmlType::Q8_0)
          quantize_block_q8_0(x, out);
        else if (type == GgmlType::Q4_0)
          quantize_block_q4_0(x, out);
        else
          quantize_block_q4_1(x, out);
      }
      break;
    }
  }
}

}  // namespace

bool can_quantize(GgmlType type) {
  return is_engine_type(type);
}

size_t quantized_size(GgmlType type, int64_t n) {
  const GgmlTypeTraits tr = checked_traits(type, n);
  return static_cast<size_t>(n) / tr.block_size * tr.type_size;
}

void quantize_row(GgmlType type, const float* src, void* dst, int64_t n) {
  const GgmlTypeTraits tr = checked_traits(type, n);
  const int64_t bad = first_non_finite(src, n);
  if (bad >= 0)
    throw Error(fmt::format("quantize: element {} is {} (a weight must be finite to become {})",
                            bad, src[bad], tr.name));
  encode(type, tr, src, static_cast<uint8_t*>(dst), static_cast<size_t>(n));
}

void quantize_tensor(GgmlType type, const std::string& name, const float* src, void* dst,
                     int64_t n_rows, int64_t row_len) {
  const GgmlTypeTraits tr = checked_traits(type, row_len);
  if (n_rows < 0) throw Error(fmt::format("quantize: tensor '{}' has {} rows", name, n_rows));
  // Scan everything first so a bad tensor leaves dst untouched.
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* row = src + r * row_len;
    const int64_t c = first_non_finite(row, row_len);
    if (c >= 0)
      throw Error(fmt::format("quantize: tensor '{}' has {} at row {}, column {}; cannot write "
                              "it as {}",
                              name, row[c], r, c, tr.name),
                  "check the source checkpoint: a NaN or Inf weight usually means a broken "
                  "conversion or an overflowed fine-tune");
  }
  const size_t row_bytes = static_cast<size_t>(row_len) / tr.block_size * tr.type_size;
  auto* p = static_cast<uint8_t*>(dst);
  for (int64_t r = 0; r < n_rows; ++r)
    encode(type, tr, src + r * row_len, p + static_cast<size_t>(r) * row_bytes,
           static_cast<size_t>(row_len));
}

}  // namespace llmctl
