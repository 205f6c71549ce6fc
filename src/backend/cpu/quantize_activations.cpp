// Activation quantization (quantize_activations.h): scalar and AVX2, same results.
#include "backend/cpu/quantize_activations.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/matmul_kernels.h"
#include "core/fp16.h"

namespace llmctl::cpu {

void quantize_activations_scalar(const float* x, int64_t n, int8_t* qs, float* d, int group) {
  for (int64_t g = 0; g < n / group; ++g) {
    const float* xg = x + group * g;
    float amax = 0.0f;
    for (int j = 0; j < group; ++j) amax = std::fmax(amax, std::fabs(xg[j]));
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    for (int j = 0; j < group; ++j)
      qs[group * g + j] = static_cast<int8_t>(std::nearbyint(xg[j] * id));
    for (int b = 0; b < group / 32; ++b) d[group / 32 * g + b] = amax / 127.0f;
  }
}

void activation_block_sums(const int8_t* qs, int64_t n, int32_t* sums) {
  for (int64_t b = 0; b < n / 32; ++b) {
    int32_t s = 0;
    for (int j = 0; j < 32; ++j) s += qs[32 * b + j];
    sums[b] = s;
  }
}

void activation_half_sums(const int8_t* qs, int64_t n, int32_t* halves) {
  for (int64_t b = 0; b < n / 32; ++b) {
    int32_t h[2] = {0, 0};
    for (int j = 0; j < 32; ++j) h[j / 16] += qs[32 * b + j];
    halves[b] = static_cast<int32_t>((static_cast<uint32_t>(h[0]) & 0xffffu) |
                                     (static_cast<uint32_t>(h[1]) << 16));
  }
}

void activation_pair_sums(const int32_t* sums, int64_t n, int32_t* pairs) {
  for (int64_t p = 0; p < n / 64; ++p)
    pairs[p] = static_cast<int32_t>((static_cast<uint32_t>(sums[2 * p]) & 0xffffu) |
                                    (static_cast<uint32_t>(sums[2 * p + 1]) << 16));
}

// Below this magnitude an f32 rounds to a finite f16 (65504 + half an ulp of 32).
constexpr float kF16Limit = 65520.0f;

bool activations_to_f16_scalar(const float* x, int64_t n, uint16_t* xh) {
  bool fits = true;
  for (int64_t j = 0; j < n; ++j) {
    xh[j] = f32_to_fp16(x[j]);
    fits = fits && std::fabs(x[j]) < kF16Limit;  // false for NaN
  }
  return fits;
}

#if defined(LLMCTL_HAVE_X86)
namespace {
// h[0 .. m) widened to f32 (exact).
LLMCTL_AVX2 void widen_f16_avx2(const uint16_t* h, int64_t m, float* out) {
  int64_t k = 0;
  for (; k + 8 <= m; k += 8)
    _mm256_storeu_ps(out + k, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + k))));
  for (; k < m; ++k) out[k] = fp16_to_f32(h[k]);
}
}  // namespace

LLMCTL_AVX2 bool activations_to_f16_avx2(const float* x, int64_t n, uint16_t* xh) {
  const __m256 sign_bit = _mm256_set1_ps(-0.0f), limit = _mm256_set1_ps(kF16Limit);
  __m256 all_fit = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 v = _mm256_loadu_ps(x + j);
    // imm 0: round to nearest even, as f32_to_fp16 (inf on overflow, NaN stays NaN)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(xh + j), _mm256_cvtps_ph(v, 0));
    all_fit = _mm256_and_ps(all_fit, _mm256_cmp_ps(_mm256_andnot_ps(sign_bit, v), limit,
                                                   _CMP_LT_OQ));  // false for NaN
  }
  const bool head_fits = _mm256_movemask_ps(all_fit) == 0xff;
  return activations_to_f16_scalar(x + j, n - j, xh + j) && head_fits;
}

LLMCTL_AVX2 void activation_sums_avx2(const int8_t* qs, int64_t n, int32_t* sums, int32_t* halves) {
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80)), zero = _mm256_setzero_si256();
  for (int64_t b = 0; b < n / 32; ++b) {
    // q + 128 as unsigned bytes; sad against zero sums each 8 of them into a 64-bit lane
    const __m256i u =
        _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * b)), flip);
    const __m256i s = _mm256_sad_epu8(u, zero);
    const __m128i lo = _mm256_castsi256_si128(s), hi = _mm256_extracti128_si256(s, 1);
    // the low 128 bits hold the first 16 bytes: lanes (first half, second half), + 16 * 128
    const __m128i h = _mm_add_epi64(_mm_unpacklo_epi64(lo, hi), _mm_unpackhi_epi64(lo, hi));
    const int32_t xa = _mm_cvtsi128_si32(h) - 16 * 128, xb = _mm_extract_epi32(h, 2) - 16 * 128;
    sums[b] = xa + xb;
    if (halves != nullptr)
      halves[b] = static_cast<int32_t>((static_cast<uint32_t>(xa) & 0xffffu) |
                                       (static_cast<uint32_t>(xb) << 16));
  }
}

namespace {
// max |x[j]| over 32 floats (max is exact, so any order equals the scalar loop's).
LLMCTL_AVX2 __m256 abs_max32(const float* x, __m256 m) {
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  for (int i = 0; i < 4; ++i)
    m = _mm256_max_ps(m, _mm256_andnot_ps(sign_bit, _mm256_loadu_ps(x + 8 * i)));
  return m;
}
}  // namespace

LLMCTL_AVX2 void quantize_activations_avx2(const float* x, int64_t n, int8_t* qs, float* d,
                                           int group) {
  for (int64_t g = 0; g < n / group; ++g) {
    const float* xg = x + group * g;
    __m256 m = _mm256_setzero_ps();
    for (int b = 0; b < group / 32; ++b) m = abs_max32(xg + 32 * b, m);
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float amax = _mm_cvtss_f32(m4);
    const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
    for (int b = 0; b < group / 32; ++b) {
      const float* xb = xg + 32 * b;
      __m256i q[4];
      for (int i = 0; i < 4; ++i)
        q[i] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(xb + 8 * i), id),
                                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
      // int32 -> int8 in element order: the packs interleave 128-bit lanes; permute undoes it
      const __m256i p01 = _mm256_packs_epi32(q[0], q[1]);  // 0-3 8-11 4-7 12-15
      const __m256i p23 = _mm256_packs_epi32(q[2], q[3]);  // 16-19 24-27 20-23 28-31
      const __m256i p = _mm256_packs_epi16(p01, p23);      // 0-3 8-11 16-19 24-27 4-7 ...
      const __m256i ordered =
          _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs + group * g + 32 * b), ordered);
      d[group / 32 * g + b] = amax / 127.0f;
    }
  }
}
#else
void quantize_activations_avx2(const float* x, int64_t n, int8_t* qs, float* d, int group) {
  quantize_activations_scalar(x, n, qs, d, group);
}
void activation_sums_avx2(const int8_t* qs, int64_t n, int32_t* sums, int32_t* halves) {
  activation_block_sums(qs, n, sums);
  if (halves != nullptr) activation_half_sums(qs, n, halves);
}
bool activations_to_f16_avx2(const float* x, int64_t n, uint16_t* xh) {
  return activations_to_f16_scalar(x, n, xh);
}
#endif

namespace {
void widen_f16_scalar(const uint16_t* h, int64_t m, float* out) {
  for (int64_t k = 0; k < m; ++k) out[k] = fp16_to_f32(h[k]);
}

// The f16 rounding of activations_to_f16_* widened back to f32, a stack chunk at a time (the
// widening is exact, so scalar and AVX2 agree); a token that does not fit keeps x.
bool round_f16(const float* x, int64_t n, float* xr,
               bool (*to_f16)(const float*, int64_t, uint16_t*),
               void (*widen)(const uint16_t*, int64_t, float*)) {
  constexpr int64_t kChunk = 256;
  uint16_t h[kChunk];
  bool fits = true;
  for (int64_t j = 0; j < n; j += kChunk) {
    const int64_t m = std::min(kChunk, n - j);
    fits = to_f16(x + j, m, h) && fits;
    widen(h, m, xr + j);
  }
  if (!fits) std::memcpy(xr, x, static_cast<size_t>(n) * sizeof(float));
  return fits;
}
}  // namespace

bool activations_round_f16_scalar(const float* x, int64_t n, float* xr) {
  return round_f16(x, n, xr, activations_to_f16_scalar, widen_f16_scalar);
}

bool activations_round_f16_avx2(const float* x, int64_t n, float* xr) {
#if defined(LLMCTL_HAVE_X86)
  return round_f16(x, n, xr, activations_to_f16_avx2, widen_f16_avx2);
#else
  return round_f16(x, n, xr, activations_to_f16_scalar, widen_f16_scalar);
#endif
}

}  // namespace llmctl::cpu
