#pragma once
// Activations quantized to int8 for the quantized-weight matmul kernels (matmul_fast.h), as
// ggml quantizes them for vec_dot_q4_0_q8_0 / q4_1_q8_1 (group 32), or with one scale per 256
// elements as its Q8_K for vec_dot_q4_K_q8_K (group 256), with float scales:
//
//   per group of `group` elements of x:  amax = max |x[j]|,  d = amax / 127,
//                               id = 127 / amax (0 when amax == 0),
//                               q[j] = round_half_even(x[j] * id)      (in -127 .. 127)
//
// Ties go to even (the AVX2 rounding instruction's mode and std::nearbyint's default), unlike
// the Q8_0 weight quantizer (quant/quantize.h), which rounds ties away from zero. The AVX2 and
// the scalar versions give the same bytes and floats; activations with NaN or Inf give
// unspecified (but not undefined) results.

#include <cstdint>

namespace llmctl::cpu {

// x (n,) -> qs (n,), d (n / 32,): d[b] is the scale of the group holding 32-element block b
// (with group 256 the 8 blocks of a group repeat it). group 32 or 256, n a multiple of it.
void quantize_activations_scalar(const float* x, int64_t n, int8_t* qs, float* d, int group = 32);
// The same with AVX2; only on a CPU with AVX2 (matmul_fast_has_avx2()).
void quantize_activations_avx2(const float* x, int64_t n, int8_t* qs, float* d, int group = 32);

// sums[b] = qs[32 b] + ... + qs[32 b + 31] for the n / 32 blocks (Q4_0's offset and Q4_1's min
// term in the quantized matmul kernels).
void activation_block_sums(const int8_t* qs, int64_t n, int32_t* sums);

// halves[b] = xa | xb << 16 for the n / 32 blocks, xa = qs[32 b] + ... + qs[32 b + 15] and xb the
// sum of the other 16, int16 each (|sum| <= 16 * 127): the operand of the madd that applies the
// per-16-element offsets and mins of Q2_K, Q3_K and Q6_K (matmul_k16_tile.h).
void activation_half_sums(const int8_t* qs, int64_t n, int32_t* halves);

// activation_block_sums and, where halves is not null, activation_half_sums in one pass, with
// AVX2 (the same integers); only on a CPU with AVX2. (The scalar half and block sums took 1.3 %
// and 0.5 % of a Gemma 3 270M prefill, d 640: many small matmuls; this takes 0.2 %.)
void activation_sums_avx2(const int8_t* qs, int64_t n, int32_t* sums, int32_t* halves);

// pairs[p] = sums[2 p] | sums[2 p + 1] << 16 for the n / 64 pairs of blocks, from
// activation_block_sums (int16 each: |sum| <= 32 * 128): the operand of the madd that applies
// the 6-bit mins of Q4_K / Q5_K and IQ4_XS's +128 to two blocks at once (matmul_q45_k.h).
// Once per token here, where the tiles packed them per row tile (Q4_K and Q5_K prefill 0.97x
// to 1.10x, median 1.05x). n a multiple of 64 (the K-quants' 256).
void activation_pair_sums(const int32_t* sums, int64_t n, int32_t* pairs);

// Activations rounded to f16 for the F16-weight kernels: xh[j] = f32_to_fp16(x[j]) (round to
// nearest even, core/fp16.h). Returns whether the token fits: every value finite with
// |x| < 65520 (the smallest magnitude that rounds to inf). When it does not, xh is not used
// (the kernel multiplies that token's f32 values). Any n >= 0; same bits scalar and AVX2.
bool activations_to_f16_scalar(const float* x, int64_t n, uint16_t* xh);
bool activations_to_f16_avx2(const float* x, int64_t n, uint16_t* xh);

// The same values widened back to f32: xr[j] = fp16_to_f32(f32_to_fp16(x[j])) when the token
// fits (as above), else xr[j] = x[j]. Returns whether it fits. Same bits scalar and AVX2.
bool activations_round_f16_scalar(const float* x, int64_t n, float* xr);
bool activations_round_f16_avx2(const float* x, int64_t n, float* xr);

}  // namespace llmctl::cpu
