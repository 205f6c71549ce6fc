#pragma once
// The K and V loads of the fast attention kernel (attention_fast.cpp), one set per pool type:
// 8 or 16 lanes of a head row, or one element, as f32. `row` is the head's first value (f32,
// f16) or first block (Q8_0, Q4_0: ggml's blocks of 32, quant/dequant.h); `i` a dimension.
//
// A block element comes out as float(q) * d with d = fp16_to_f32(block's d): one rounding, the
// very value dequantize_block_q8_0 / q4_0 give (the reference backend's), so the kernel's
// arithmetic after the load is the same for every pool type and the AVX2 and AVX-512 loads
// agree bit for bit. A load of 8 lanes starts at a multiple of 8, one of 16 at a multiple of 16
// (the kernel's slices), so its lanes lie in one block.

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "backend/backend.h"
#include "core/fp16.h"

namespace llmctl::cpu::kv_load {

#define LLMCTL_KV_AVX2 __attribute__((target("avx2,fma,f16c")))
#define LLMCTL_KV_AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512dq")))

constexpr int64_t kQ80Bytes = 34, kQ40Bytes = 18;

// The block holding dimension i, and its scale d.
template <BufferType T>
inline const uint8_t* block_of(const void* row, int64_t i) {
  return static_cast<const uint8_t*>(row) + (i / 32) * (T == BufferType::Q8_0 ? kQ80Bytes : kQ40Bytes);
}
inline float block_scale(const uint8_t* b) {
  return fp16_to_f32(static_cast<uint16_t>(b[0] | (b[1] << 8)));
}

// The nibbles of Q4_0 elements j .. j + 7 (j % 32 a multiple of 8) as 8 bytes in the low
// half: elements 0..15 are the low nibbles of qs[0..16), 16..31 the high ones.
LLMCTL_KV_AVX2 inline __m128i q4_0_nibbles8(const uint8_t* b, int64_t j) {
  const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + 2 + j % 16));
  const __m128i n = j < 16 ? bytes : _mm_srli_epi16(bytes, 4);
  return _mm_and_si128(n, _mm_set1_epi8(0x0f));
}

template <BufferType T>
LLMCTL_KV_AVX2 inline __m256 load8(const void* row, int64_t i) {
  if constexpr (T == BufferType::F16) {
    return _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(row) + i)));
  } else if constexpr (T == BufferType::Q8_0) {
    const uint8_t* b = block_of<T>(row, i);
    const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + 2 + i % 32));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)),
                         _mm256_set1_ps(block_scale(b)));
  } else if constexpr (T == BufferType::Q4_0) {
    const uint8_t* b = block_of<T>(row, i);
    const __m256i q = _mm256_sub_epi32(_mm256_cvtepu8_epi32(q4_0_nibbles8(b, i % 32)),
                                       _mm256_set1_epi32(8));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(q), _mm256_set1_ps(block_scale(b)));
  } else {
    return _mm256_loadu_ps(static_cast<const float*>(row) + i);
  }
}

template <BufferType T>
inline float load1(const void* row, int64_t i) {
  if constexpr (T == BufferType::F16) {
    return fp16_to_f32(static_cast<const uint16_t*>(row)[i]);
  } else if constexpr (T == BufferType::Q8_0) {
    const uint8_t* b = block_of<T>(row, i);
    int8_t q;
    std::memcpy(&q, b + 2 + i % 32, 1);
    return static_cast<float>(q) * block_scale(b);
  } else if constexpr (T == BufferType::Q4_0) {
    const uint8_t* b = block_of<T>(row, i);
    const int j = static_cast<int>(i % 32);
    const int q = j < 16 ? (b[2 + j] & 0x0f) : (b[2 + j - 16] >> 4);
    return static_cast<float>(q - 8) * block_scale(b);
  } else {
    return static_cast<const float*>(row)[i];
  }
}

// Dimensions i .. i + 7 of two rows: row a in the low half, row b in the high half.
template <BufferType T>
LLMCTL_KV_AVX512 inline __m512 load8x2(const void* a, const void* b, int64_t i) {
  if constexpr (T == BufferType::F16) {
    const __m128i ha =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(a) + i));
    const __m128i hb =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(b) + i));
    return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(ha), hb, 1));
  } else if constexpr (T == BufferType::F32) {
    return _mm512_insertf32x8(
        _mm512_castps256_ps512(_mm256_loadu_ps(static_cast<const float*>(a) + i)),
        _mm256_loadu_ps(static_cast<const float*>(b) + i), 1);
  } else {
    return _mm512_insertf32x8(_mm512_castps256_ps512(load8<T>(a, i)), load8<T>(b, i), 1);
  }
}

// 16 lanes of a row (dimensions i .. i + 15, i a multiple of 16).
template <BufferType T>
LLMCTL_KV_AVX512 inline __m512 load16(const void* row, int64_t i) {
  if constexpr (T == BufferType::F16) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(row) + i)));
  } else if constexpr (T == BufferType::Q8_0) {
    const uint8_t* b = block_of<T>(row, i);
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2 + i % 32));
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)),
                         _mm512_set1_ps(block_scale(b)));
  } else if constexpr (T == BufferType::Q4_0) {
    const uint8_t* b = block_of<T>(row, i);
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2));
    const __m128i n =
        _mm_and_si128(i % 32 == 0 ? bytes : _mm_srli_epi16(bytes, 4), _mm_set1_epi8(0x0f));
    const __m512i q = _mm512_sub_epi32(_mm512_cvtepu8_epi32(n), _mm512_set1_epi32(8));
    return _mm512_mul_ps(_mm512_cvtepi32_ps(q), _mm512_set1_ps(block_scale(b)));
  } else {
    return _mm512_loadu_ps(static_cast<const float*>(row) + i);
  }
}

// Byte offset of value `elem` of a pool (elem a multiple of the type's block).
inline size_t pool_offset(BufferType t, int64_t elem) {
  return static_cast<size_t>(elem / buffer_block_elems(t)) * buffer_block_bytes(t);
}

}  // namespace llmctl::cpu::kv_load
