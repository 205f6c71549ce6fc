#pragma once
// Reference dequantization: ggml block layouts decoded one block at a time, written for
// clarity. The per-block functions are plain inline C++ over bytes (no alignment assumed)
// so a CUDA kernel can later share them as __host__ __device__ code.
//
//   block_q8_0 (34 B): fp16 d; int8 qs[32]             x[j] = qs[j] * d
//   block_q4_0 (18 B): fp16 d; uint8 qs[16]            x[j] = ((qs[j] & 15) - 8) * d,
//                                                      x[j + 16] = ((qs[j] >> 4) - 8) * d
//   block_q4_1 (20 B): fp16 d; fp16 m; uint8 qs[16]    x[j] = (qs[j] & 15) * d + m, ...
//   block_q5_0 (22 B): fp16 d; uint8 qh[4]; uint8 qs[16]
//                      q[j] = (qs[j] & 15) | (bit j of qh as u32 LE) << 4,
//                      q[j + 16] = (qs[j] >> 4) | (bit j + 16) << 4;  x = (q - 16) * d
//   block_q5_1 (24 B): fp16 d; fp16 m; uint8 qh[4]; uint8 qs[16]   x = q * d + m (q as Q5_0)
//
// K-quants: 256-element super-blocks of sub-blocks, whose scales are themselves quantized.
//   block_q4_k (144 B): fp16 d; fp16 dmin; uint8 scales[12]; uint8 qs[128]
//       8 sub-blocks of 32, each with a 6-bit scale sc and a 6-bit min m (packing below).
//       Element 64c + l (c < 4, l < 32) is the low nibble of qs[32c + l] (sub-block 2c),
//       element 64c + 32 + l its high nibble (sub-block 2c + 1).  x = (d*sc) * q - (dmin*m)
//   block_q5_k (176 B): fp16 d; fp16 dmin; uint8 scales[12]; uint8 qh[32]; uint8 qs[128]
//       as Q4_K with a fifth bit: sub-block j's element l has bit j of qh[l] as bit 4.
//   block_q6_k (210 B): uint8 ql[128]; uint8 qh[64]; int8 scales[16]; fp16 d
//       16 sub-blocks of 16 with signed 8-bit scales; x = (d*scales[e/16]) * (q - 32).
//       Half h (128 elements) uses ql[64h..), qh[32h..); element 128h + 32k + l (k < 4,
//       l < 32) has low 4 bits ql[64h + l + 32(k&1)] (k < 2: low nibble, else high) and
//       high 2 bits (qh[32h + l] >> 2k) & 3.
//   Q4_K/Q5_K scale packing (12 bytes, j < 8): j < 4: sc = s[j] & 63, m = s[j+4] & 63;
//   j >= 4: sc = (s[j+4] & 15) | (s[j-4] >> 6) << 4, m = (s[j+4] >> 4) | (s[j] >> 6) << 4.
//   block_q2_k (84 B): uint8 scales[16]; uint8 qs[64]; fp16 d; fp16 dmin
//       16 sub-blocks of 16; scales[s]: low nibble sc, high nibble m. Element 128h + 32k + l
//       (h < 2, k < 4, l < 32) is q = (qs[32h + l] >> 2k) & 3.
//       x = (d*sc) * q - (dmin*m)
//   block_q3_k (110 B): uint8 hmask[32]; uint8 qs[64]; uint8 scales[12]; fp16 d
//       16 sub-blocks of 16 with 6-bit scales sc (s < 16: low 4 bits s < 8 ? scales[s] & 15 :
//       scales[s-8] >> 4, high 2 bits (scales[8 + s%4] >> 2(s/4)) & 3). Element 128h + 32k + l
//       has low bits (qs[32h + l] >> 2k) & 3 and, when bit 4h + k of hmask[l] is clear, - 4.
//       x = (d*(sc - 32)) * q
//
// Non-linear 4-bit types: the nibble indexes kIq4nlValues (ggml's kvalues_iq4nl), an int8.
//   block_iq4_nl (18 B): fp16 d; uint8 qs[16]
//       x[j] = d * v[qs[j] & 15], x[j + 16] = d * v[qs[j] >> 4]  (v = kIq4nlValues)
//   block_iq4_xs (136 B): fp16 d; u16 scales_h (LE); uint8 scales_l[4]; uint8 qs[128]
//       8 sub-blocks of 32, each laid out as an IQ4_NL block's qs (qs[16b..16b+16)) with the
//       scale d * (ls - 32), ls = (scales_l[b/2] >> 4(b%2)) & 15 | ((scales_h >> 2b) & 3) << 4.
// Microscaling FP4 (OCP MX): the nibble indexes kMxfp4Values, ggml's kvalues_mxfp4, which are
// the E2M1 levels doubled; the E8M0 scale is halved to make up for it.
//   block_mxfp4 (17 B): uint8 e (E8M0); uint8 qs[16]   (qs as IQ4_NL's)
//       x[j] = v[qs[j] & 15] * h(e), x[j + 16] = v[qs[j] >> 4] * h(e)  (v = kMxfp4Values)
//       h(e) = 2^(e - 128) (ggml_e8m0_to_fp32_half: e = 0, 1 give the denormals 2^-128,
//       2^-127; 255, NaN in the spec, is 2^127 as in ggml, which rejects it in validation)
// Float operations happen in ggml's order (d*sc first, then * q, then - dmin*m), so the
// results equal ggml's and gguf-py's bit for bit.

#include <cstdint>
#include <cstring>

#include "core/fp16.h"
#include "core/ggml_type.h"

namespace llmctl {

inline uint16_t load_u16_le(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}

inline void dequantize_block_q8_0(const uint8_t* block, float* out) {
  const float d = fp16_to_f32(load_u16_le(block));
  for (int j = 0; j < 32; ++j) {
    int8_t q;
    std::memcpy(&q, block + 2 + j, 1);
    out[j] = static_cast<float>(q) * d;
  }
}

inline void dequantize_block_q4_0(const uint8_t* block, float* out) {
  const float d = fp16_to_f32(load_u16_le(block));
  const uint8_t* qs = block + 2;
  for (int j = 0; j < 16; ++j) {
    out[j] = static_cast<float>((qs[j] & 0x0f) - 8) * d;
    out[j + 16] = static_cast<float>((qs[j] >> 4) - 8) * d;
  }
}

inline void dequantize_block_q4_1(const uint8_t* block, float* out) {
  const float d = fp16_to_f32(load_u16_le(block));
  const float m = fp16_to_f32(load_u16_le(block + 2));
  const uint8_t* qs = block + 4;
  for (int j = 0; j < 16; ++j) {
    out[j] = static_cast<float>(qs[j] & 0x0f) * d + m;
    out[j + 16] = static_cast<float>(qs[j] >> 4) * d + m;
  }
}

// 5-bit quant q of element j (0..31) of a Q5_0/Q5_1 block: nibble + the qh bit.
inline int q5_value(const uint8_t* qh, const uint8_t* qs, int j) {
  const uint32_t h = static_cast<uint32_t>(qh[0] | (qh[1] << 8) | (qh[2] << 16)) |
                     (static_cast<uint32_t>(qh[3]) << 24);
  const int lo = j < 16 ? (qs[j] & 0x0f) : (qs[j - 16] >> 4);
  return lo | static_cast<int>(((h >> j) & 1u) << 4);
}

inline void dequantize_block_q5_0(const uint8_t* block, float* out) {
  const float d = fp16_to_f32(load_u16_le(block));
  for (int j = 0; j < 32; ++j) out[j] = static_cast<float>(q5_value(block + 2, block + 6, j) - 16) * d;
}

inline void dequantize_block_q5_1(const uint8_t* block, float* out) {
  const float d = fp16_to_f32(load_u16_le(block));
  const float m = fp16_to_f32(load_u16_le(block + 2));
  for (int j = 0; j < 32; ++j)
    out[j] = static_cast<float>(q5_value(block + 4, block + 8, j)) * d + m;
}

// Scale and min (6 bits each) of sub-block j (0..7) of a Q4_K/Q5_K block (packing above).
inline void k_scale_min(const uint8_t* s, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Q4_K (with_high == false) and Q5_K: the same scales, Q5_K adds qh.
inline void dequantize_block_q45_k(const uint8_t* block, bool with_high, float* out) {
  const float d = fp16_to_f32(load_u16_le(block));
  const float dmin = fp16_to_f32(load_u16_le(block + 2));
  const uint8_t* scales = block + 4;
  const uint8_t* qh = block + 16;
  const uint8_t* qs = with_high ? block + 48 : block + 16;
  for (int j = 0; j < 8; ++j) {
    int sc = 0, m = 0;
    k_scale_min(scales, j, &sc, &m);
    const float d1 = d * static_cast<float>(sc);
    const float m1 = dmin * static_cast<float>(m);
    const uint8_t* q = qs + 32 * (j / 2);
    for (int l = 0; l < 32; ++l) {
      int v = (j % 2 == 0) ? (q[l] & 0x0f) : (q[l] >> 4);
      if (with_high) v |= ((qh[l] >> j) & 1) << 4;
      out[32 * j + l] = d1 * static_cast<float>(v) - m1;
    }
  }
}

inline void dequantize_block_q4_k(const uint8_t* block, float* out) {
  dequantize_block_q45_k(block, false, out);
}
inline void dequantize_block_q5_k(const uint8_t* block, float* out) {
  dequantize_block_q45_k(block, true, out);
}

// The 6-bit quant (0..63) of element e (0..255) of a Q6_K block.
inline int q6_k_value(const uint8_t* block, int e) {
  const int h = e / 128, k = (e % 128) / 32, l = e % 32;
  const uint8_t lo_byte = block[64 * h + l + 32 * (k & 1)];
  const int lo = k < 2 ? (lo_byte & 0x0f) : (lo_byte >> 4);
  const int hi = (block[128 + 32 * h + l] >> (2 * k)) & 3;
  return lo | (hi << 4);
}

inline void dequantize_block_q6_k(const uint8_t* block, float* out) {
  const float d = fp16_to_f32(load_u16_le(block + 208));
  for (int s = 0; s < 16; ++s) {
    int8_t sc;
    std::memcpy(&sc, block + 192 + s, 1);
    const float ds = d * static_cast<float>(sc);
    for (int l = 0; l < 16; ++l)
      out[16 * s + l] = ds * static_cast<float>(q6_k_value(block, 16 * s + l) - 32);
  }
}

// Q2_K: the 2-bit quant (0..3) of element e (0..255) and its sub-block's scale byte.
inline int q2_k_value(const uint8_t* block, int e) {
  const int h = e / 128, k = (e % 128) / 32, l = e % 32;
  return (block[16 + 32 * h + l] >> (2 * k)) & 3;
}

inline void dequantize_block_q2_k(const uint8_t* block, float* out) {
  const float d = fp16_to_f32(load_u16_le(block + 80));
  const float dmin = fp16_to_f32(load_u16_le(block + 82));
  for (int s = 0; s < 16; ++s) {
    const float dl = d * static_cast<float>(block[s] & 0x0f);
    const float ml = dmin * static_cast<float>(block[s] >> 4);
    for (int l = 0; l < 16; ++l)
      out[16 * s + l] = dl * static_cast<float>(q2_k_value(block, 16 * s + l)) - ml;
  }
}

// Q3_K: the 6-bit scale (0..63, before - 32) of sub-block s (0..15) and the signed quant
// (-4..3) of element e (0..255).
inline int q3_k_scale(const uint8_t* block, int s) {
  const uint8_t* sc = block + 96;
  const int lo = s < 8 ? (sc[s] & 0x0f) : (sc[s - 8] >> 4);
  const int hi = (sc[8 + s % 4] >> (2 * (s / 4))) & 3;
  return lo | (hi << 4);
}

inline int q3_k_value(const uint8_t* block, int e) {
  const int h = e / 128, k = (e % 128) / 32, l = e % 32;
  const int lo = (block[32 + 32 * h + l] >> (2 * k)) & 3;
  const bool high = ((block[l] >> (4 * h + k)) & 1) != 0;
  return high ? lo : lo - 4;
}

inline void dequantize_block_q3_k(const uint8_t* block, float* out) {
  const float d = fp16_to_f32(load_u16_le(block + 108));
  for (int s = 0; s < 16; ++s) {
    const float dl = d * static_cast<float>(q3_k_scale(block, s) - 32);
    for (int l = 0; l < 16; ++l)
      out[16 * s + l] = dl * static_cast<float>(q3_k_value(block, 16 * s + l));
  }
}

// ggml's kvalues_iq4nl: the 16 levels of IQ4_NL and IQ4_XS, a non-uniform int8 grid.
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// The table level of element j (0..31) of 16 bytes of IQ4 nibbles.
inline int iq4_value(const uint8_t* qs, int j) {
  return kIq4nlValues[j < 16 ? (qs[j] & 0x0f) : (qs[j - 16] >> 4)];
}

inline void dequantize_block_iq4_nl(const uint8_t* block, float* out) {
  const float d = fp16_to_f32(load_u16_le(block));
  for (int j = 0; j < 32; ++j) out[j] = d * static_cast<float>(iq4_value(block + 2, j));
}

// IQ4_XS: the signed scale ls - 32 (-32..31) of sub-block b (0..7).
inline int iq4_xs_scale(const uint8_t* block, int b) {
  const int lo = (block[4 + b / 2] >> (4 * (b % 2))) & 0x0f;
  const int hi = (load_u16_le(block + 2) >> (2 * b)) & 3;
  return (lo | (hi << 4)) - 32;
}

inline void dequantize_block_iq4_xs(const uint8_t* block, float* out) {
  const float d = fp16_to_f32(load_u16_le(block));
  for (int b = 0; b < 8; ++b) {
    const float dl = d * static_cast<float>(iq4_xs_scale(block, b));
    for (int j = 0; j < 32; ++j)
      out[32 * b + j] = dl * static_cast<float>(iq4_value(block + 8 + 16 * b, j));
  }
}

// ggml's kvalues_mxfp4: 2 * the E2M1 values {0, .5, 1, 1.5, 2, 3, 4, 6}, then their
// negatives (index 8 is -0, which is 0 as an int8: it dequantizes to +0.0).
inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// The table level of element j (0..31) of 16 bytes of MXFP4 nibbles.
inline int mxfp4_value(const uint8_t* qs, int j) {
  return kMxfp4Values[j < 16 ? (qs[j] & 0x0f) : (qs[j - 16] >> 4)];
}

// h(e) = 2^(e - 128), the E8M0 scale e halved (ggml_e8m0_to_fp32_half), exact.
inline float e8m0_half_to_f32(uint8_t e) {
  return bits_to_f32(e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23);
}

inline void dequantize_block_mxfp4(const uint8_t* block, float* out) {
  const float d = e8m0_half_to_f32(block[0]);
  for (int j = 0; j < 32; ++j) out[j] = static_cast<float>(mxfp4_value(block + 1, j)) * d;
}

// Whether dequantize_row() handles `type` (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1,
// Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4).
bool can_dequantize(GgmlType type);

// One block of a block type (Q8_0 ... IQ4_XS) into out[0..block_size).
void dequantize_block(GgmlType type, const uint8_t* block, float* out);

// Decodes n elements of `type` from `src` (n / block_size whole blocks, in ggml's layout)
// into dst[0..n). Throws Error for an unsupported type or an n that is negative or not a
// multiple of the block size.
void dequantize_row(GgmlType type, const void* src, float* dst, int64_t n);

}  // namespace llmctl
