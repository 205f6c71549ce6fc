#include "quant/quantize.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "core/fp16.h"
#include "quant/dequant.h"
#include "quant/quantize_blocks.h"

namespace llmctl {
namespace quant_detail {

void store_u16_le(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v & 0xffu);
  p[1] = static_cast<uint8_t>(v >> 8);
}

namespace {

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

// q = min(qmax, (int8)(v + bias)) (a negative value cannot occur for finite inputs:
// v >= -half - rounding for Q4_0/Q5_0, v >= 0 for Q4_1/Q5_1).
int quant_of(float v, float bias, int qmax) {
  const int q = trunc_to_int8(v + bias);
  return q < qmax ? q : qmax;
}

// Q4_0 (half = 8) and Q5_0 (half = 16): d = max / -half, q = min(2 half - 1, trunc(x/d + half
// + 0.5)).
void quantize_block_symmetric(GgmlType type, int half, const float* x, uint8_t* out) {
  float amax = 0.0f;
  float max = 0.0f;
  for (int j = 0; j < 32; ++j) {
    if (amax < std::fabs(x[j])) {  // strict: the first of equal magnitudes wins
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  const float d = max / static_cast<float>(-half);
  const float id = inverse_or_zero(d);
  store_u16_le(out, f32_to_fp16(d));
  int q[32];
  for (int j = 0; j < 32; ++j)
    q[j] = quant_of(mul_rounded(x[j], id), static_cast<float>(half) + 0.5f, 2 * half - 1);
  pack_block_quants(type, q, out);
}

// Q4_1 (qmax = 15) and Q5_1 (31): d = (max - min) / qmax, q = trunc((x - min)/d + 0.5).
void quantize_block_affine(GgmlType type, int qmax, const float* x, uint8_t* out) {
  float min = std::numeric_limits<float>::max();
  float max = -std::numeric_limits<float>::max();
  for (int j = 0; j < 32; ++j) {
    if (x[j] < min) min = x[j];
    if (x[j] > max) max = x[j];
  }
  const float d = (max - min) / static_cast<float>(qmax);
  const float id = inverse_or_zero(d);
  store_u16_le(out, f32_to_fp16(d));
  store_u16_le(out + 2, f32_to_fp16(min));
  int q[32];
  for (int j = 0; j < 32; ++j) q[j] = quant_of(mul_rounded(x[j] - min, id), 0.5f, qmax);
  pack_block_quants(type, q, out);
}

}  // namespace

void pack_block_quants(GgmlType type, const int* q, uint8_t* out) {
  const bool five = type == GgmlType::Q5_0 || type == GgmlType::Q5_1;
  const bool has_min = type == GgmlType::Q4_1 || type == GgmlType::Q5_1;
  uint8_t* p = out + (has_min ? 4 : 2);
  if (five) {
    uint32_t qh = 0;
    for (int j = 0; j < 32; ++j) qh |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
    for (int k = 0; k < 4; ++k) p[k] = static_cast<uint8_t>((qh >> (8 * k)) & 0xffu);
    p += 4;
  }
  for (int j = 0; j < 16; ++j)
    p[j] = static_cast<uint8_t>((q[j] & 0x0f) | ((q[j + 16] & 0x0f) << 4));
}

void quantize_block_rtn(GgmlType type, const float* x, uint8_t* out) {
  switch (type) {
    case GgmlType::Q8_0:
      quantize_block_q8_0(x, out);
      break;
    case GgmlType::Q4_0:
      quantize_block_symmetric(type, 8, x, out);
      break;
    case GgmlType::Q5_0:
      quantize_block_symmetric(type, 16, x, out);
      break;
    case GgmlType::Q4_1:
      quantize_block_affine(type, 15, x, out);
      break;
    case GgmlType::Q5_1:
      quantize_block_affine(type, 31, x, out);
      break;
    default:
      LLMCTL_ASSERT(false && "quantize_block_rtn: not a 32-element block type");
  }
}

}  // namespace quant_detail

namespace {

using quant_detail::store_u16_le;

constexpr const char* kQuantizableNames =
    "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, "
    "MXFP4";

// Index of the first NaN or Inf in src[0..n), or -1.
int64_t first_non_finite(const float* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(src[i])) return i;
  return -1;
}

GgmlTypeTraits checked_traits(GgmlType type, int64_t n) {
  if (!can_quantize(type))
    throw Error(fmt::format("quantize: type {} is not supported (supported: {})",
                            ggml_type_name(type), kQuantizableNames));
  const GgmlTypeTraits tr = ggml_traits(type);
  if (n < 0 || n % tr.block_size != 0)
    throw Error(fmt::format("quantize: {} elements is not a whole number of {} blocks of {}", n,
                            tr.name, tr.block_size),
                "pad the row or pick a type whose block size divides it (F16, BF16, F32)");
  return tr;
}

bool is_k_quant(GgmlType type) {
  return type == GgmlType::Q2_K || type == GgmlType::Q3_K || type == GgmlType::Q4_K ||
         type == GgmlType::Q5_K || type == GgmlType::Q6_K;
}

bool is_iq4(GgmlType type) { return type == GgmlType::IQ4_NL || type == GgmlType::IQ4_XS; }

// Encodes one row of `count` elements after all checks have passed. `w` (count,) weighs each
// element (nullptr: RTN for the 32-element types, the unweighted search for the k-quants).
void encode(GgmlType type, const GgmlTypeTraits& tr, const float* src, const float* w, uint8_t* p,
            size_t count) {
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
    case GgmlType::Q4_0:
    case GgmlType::Q4_1:
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
      if (w != nullptr) {
        quant_detail::quantize_row_legacy_weighted(type, src, w, p, static_cast<int64_t>(count));
        break;
      }
      [[fallthrough]];
    default: {
      const size_t blocks = count / tr.block_size;
      for (size_t b = 0; b < blocks; ++b) {
        const float* x = src + b * tr.block_size;
        const float* wb = w != nullptr ? w + b * tr.block_size : nullptr;
        uint8_t* out = p + b * tr.type_size;
        if (is_k_quant(type))
          quant_detail::quantize_block_k(type, x, wb, out);
        else if (is_iq4(type))
          quant_detail::quantize_block_iq4(type, x, wb, out);
        else if (type == GgmlType::MXFP4)
          quant_detail::quantize_block_mxfp4(x, out);
        else
          quant_detail::quantize_block_rtn(type, x, out);
      }
      break;
    }
  }
}

}  // namespace

bool can_quantize(GgmlType type) {
  // Every engine type has an encoder.
  return is_engine_type(type);
}

bool uses_importance(GgmlType type) {
  // Every block type we write except Q8_0, whose 8-bit RTN leaves a search little to gain,
  // and MXFP4, whose ggml quantizer has no weighted variant (quantize_mxfp4 ignores them).
  return can_quantize(type) && ggml_traits(type).block_size > 1 && type != GgmlType::Q8_0 &&
         type != GgmlType::MXFP4;
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
  encode(type, tr, src, nullptr, static_cast<uint8_t*>(dst), static_cast<size_t>(n));
}

void quantize_kv_row(GgmlType type, const float* src, void* dst, int64_t n) {
  LLMCTL_ASSERT((type == GgmlType::Q8_0 || type == GgmlType::Q4_0) && n >= 0 && n % 32 == 0);
  auto* out = static_cast<uint8_t*>(dst);
  const size_t bb = ggml_traits(type).type_size;
  for (int64_t i = 0; i < n; i += 32)
    quant_detail::quantize_block_rtn(type, src + i, out + static_cast<size_t>(i / 32) * bb);
}

void quantize_rows(GgmlType type, const float* src, void* dst, int64_t n_rows, int64_t row_len,
                   const float* col_weights) {
  const GgmlTypeTraits tr = checked_traits(type, row_len);
  if (n_rows < 0) throw Error(fmt::format("quantize: {} rows", n_rows));
  const int64_t bad = first_non_finite(src, n_rows * row_len);
  if (bad >= 0)
    throw Error(
        fmt::format("quantize: row {}, column {} is {} (a weight must be finite to "
                    "become {})",
                    bad / row_len, bad % row_len, src[bad], tr.name));
  if (col_weights != nullptr)
    for (int64_t c = 0; c < row_len; ++c)
      if (!(col_weights[c] >= 0.0f) || !std::isfinite(col_weights[c]))
        throw Error(fmt::format("quantize: column weight {} is {} (expected finite and >= 0)", c,
                                col_weights[c]));
  const size_t row_bytes = static_cast<size_t>(row_len) / tr.block_size * tr.type_size;
  auto* p = static_cast<uint8_t*>(dst);
  for (int64_t r = 0; r < n_rows; ++r)
    encode(type, tr, src + r * row_len, uses_importance(type) ? col_weights : nullptr,
           p + static_cast<size_t>(r) * row_bytes, static_cast<size_t>(row_len));
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
  quantize_rows(type, src, dst, n_rows, row_len, nullptr);
}

}  // namespace llmctl
