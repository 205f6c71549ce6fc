#pragma once
// Reference quantization into ggml's block layouts (see quant/dequant.h for the layouts).
// For F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0 and Q5_1 the output is round-to-nearest and
// byte-identical to ggml's reference C functions (quantize_row_{q8_0,q4_0,q4_1,q5_0,q5_1}_ref
// and its fp32 -> fp16 / bf16 conversions), so files we
// write load in llama.cpp and produce the same bytes it would. Written for clarity, one block
// at a time; checked against gguf-py in tests/test_quantize.cpp and against ggml's own
// quantizer in tests/test_quantize_k.cpp.
//
// Rounding rules, per 32-element block x[0..32), all arithmetic in float32 with one rounding
// per operation (no fused multiply-add; see quantize.cpp). That is the C source read as ISO C
// and what gguf-py computes; a llama.cpp binary built with FMA contraction (GNU C mode plus
// -march=native on FMA hardware) can itself differ in rare Q4_0/Q4_1 nibbles.
//
//   F16, BF16  each value rounded to nearest, ties to even (core/fp16.h). Values beyond fp16's
//              range become +-inf, as in ggml.
//   Q8_0       d = max|x| / 127, id = 1/d (0 when d == 0), q = round(x * id) with ties AWAY
//              from zero (C roundf). So x*id = 2.5 gives 3 and -2.5 gives -3.
//   Q4_0       max = the element of largest magnitude, WITH its sign (the first one when several
//              share that magnitude); d = max / -8, id = 1/d (0 when d == 0);
//              q = min(15, trunc(x * id + 8.5)). Adding 8.5 then truncating sends ties in x*id
//              toward +infinity: x*id = -0.5 gives 8 (value 0), 0.5 gives 9 (value 1).
//              The max element itself maps to q = 0, i.e. exactly -8 * d = max; q = 16
//              (x*id near +8) is clamped to 15. An all-zero block leaves max = +0, so
//              d = +0 / -8 = -0 (stored 0x8000).
//   Q5_0       as Q4_0 with 32 levels: d = max / -16, q = min(31, trunc(x * id + 16.5)).
//   Q4_1       min, max over the block; d = (max - min) / 15, id = 1/d (0 when d == 0);
//              q = min(15, trunc((x - min) * id + 0.5)): ties round UP. m = min stored as fp16
//              (an all-equal block gives d = 0, q = 0, m = fp16(x)); min starts the search at
//              FLT_MAX and takes the first of equal values, so a block of +0 and -0 whose first
//              element is -0 gets m = -0.
//   Q5_1       as Q4_1 with 32 levels: d = (max - min) / 31, q = trunc((x - min) * id + 0.5),
//              clamped to 31 (ggml does not clamp, but x = max gives at most 31.5 before
//              truncation, so the clamp never acts on finite input).
//   d (and m) are computed in float and then rounded to fp16 (nearest, ties even); q is
//   computed from the float d, not the rounded one. A d beyond 65504 is stored as +-inf (what
//   ggml writes; the block then dequantizes to inf/NaN). When 1/d overflows float (|d| below
//   2^-128: Q8_0 amax under ~3.7e-37, Q4_0 |max| under ~2.4e-38; d then rounds to fp16 zero
//   anyway) or (x - min) overflows, x * id is not finite; ggml's C converts it to int8 with
//   undefined behaviour, and on x86 that gives 0. We define q = 0 there, the x86 result.
//
// Where the independent implementations differ (see tools/gen_quant_fixture.py), we follow
// ggml's C: gguf-py picks Q4_0's max with numpy argmax, which returns the first element even
// when every |x| is 0, so a block starting with -0 gets d = +0 where C gets d = -0; and
// numpy's min may return +0 where C's first-wins search returns -0 (Q4_1's m). BF16 follows
// today's ggml reference (subnormals kept); ggml of early 2024, and CPUs converting with
// AVX512-BF16 instructions, flush float subnormals to zero instead.

// K-quants (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) and IQ4_NL / IQ4_XS: byte-identical to llama.cpp's
// quantizer for the same type and importance matrix, i.e. to ggml_quantize_chunk() (without
// an importance matrix quantize_row_<type>_ref, with one quantize_row_<type>_impl; IQ4 has
// one search for both). Our code (quantize_k.cpp, quantize_iq4.cpp, the level fits in
// quantize_k_fit.cpp) follows ggml-quants.c's algorithms operation for operation; checked
// byte for byte against ggml itself in tests/test_quantize_k.cpp (tools/gen_kquant_golden.py).
// What "the same" takes:
//   - ggml's nearest_int: round to nearest, ties to even, by adding 1.5 * 2^23 (quantize_k_fit.h);
//     integer levels are converted to uint8 / int8 exactly where ggml's C converts them
//     (e.g. Q4_K's 6-bit scale is (uint8) nearest_int(63 / max_scale * scale), then min 63).
//   - every float expression in ggml's order: sums accumulate in element order, products
//     associate left to right as the C source writes them (w*l*x is (w * l) * x), ints
//     convert to float where C's usual conversions do. One reassociation changes a rounding,
//     and the golden test then fails in a few blocks.
//   - the fit's search state: ggml's make_qkx2/qkx3_quants step each trial from the best
//     offset found so far, and a sub-block whose stored scale is zero keeps the fit's levels.
//   - no fused multiply-add: the quantizer llama.cpp ships (libggml-base.so of
//     llama-cpp-python 0.3.36; `objdump -d` finds no FMA instruction in it: ggml's native
//     flags go to ggml-cpu, not ggml-base) rounds once per operation, and our encoders are
//     compiled with -ffp-contract=off (CMakeLists.txt) to compute the same. A llama.cpp build
//     whose ggml-quants.c is compiled with FMA contraction (GNU C plus -march=native on an FMA
//     machine) may round differently and write other bytes in some blocks (not measured); we
//     match the contraction-free build, which is also what the C source means in ISO C.
// The algorithms, per 256-element super-block (ggml's names in parentheses):
//   Q4_K, Q5_K  without weights (quantize_row_q{4,5}_K_ref): per 32-element sub-block, the
//               affine fit of make_qkx2_quants with weights sqrt(mean x^2) + |x| and 21 (Q4_K:
//               nmax + -1 + 0.1 k, k = 0..20) or 16 (Q5_K: -0.5 + 0.1 k, k = 0..15) trial
//               steps; scales and mins to 6 bits against d = max scale / 63, dmin = max min
//               / 63. With weights (_impl): weights imatrix * sqrt(sigma2 + x^2), sigma2 =
//               2 * mean x^2 over the super-block, make_qkx3_quants with 37 steps (-0.9 +
//               0.05 k), then the 8 scales and the 8 mins fitted to 63 levels by
//               make_qp_quants, weighted by each sub-block's total weight.
//   Q6_K        per 16 elements, the symmetric fit of make_qx_quants to -32..31 (weights x^2,
//               or the importance matrix as it is); int8 scales against d = max / -128.
//   Q3_K        without weights: make_q3_quants per 16 elements (-4..3), scales to 6 bits
//               against d = max / -32; with weights: make_qx_quants per sub-block (weights as
//               Q4_K's) and again for the 16 scales.
//   Q2_K        without weights: make_qkx2_quants per 16 elements (0..3, weights |x|, absolute
//               error), 4-bit scales and mins against max / 15; with weights: make_qkx3_quants
//               (sigma2 = mean x^2, not twice it) and make_qp_quants for scales and mins.
//   IQ4_NL/XS   per 32 elements, the best scale for ggml's 16-value table (15 trial steps),
//               weights imatrix * sqrt(sigma2 + x^2) or x^2; IQ4_XS's 8 block scales to 6 bits
//               against d = -max / 32.
//   Levels are then recomputed from the stored fp16 d (and dmin) times the stored sub-block
//   scale. An all-zero super-block writes zeros (IQ4: d = 0 and nibbles at the table's
//   value nearest 0).
//
// MXFP4: ggml's quantize_row_mxfp4_ref (quantize_mxfp4.cpp): the E8M0 exponent from log2f of
// the block's max |x|, then every element to the nearest of the 16 levels (first wins), with
// ggml's bytes even where its (uint8_t) cast wraps (max |x| < 2^-125); no importance weights
// (ggml has no weighted MXFP4 search). Checked against ggml and gguf-py in tests/test_mxfp4.cpp.
//
// Importance weights (quantize_rows with col_weights, from `--imatrix`; types where
// uses_importance() is true): llama.cpp's weighted algorithms, with its bytes (ggml's
// quantize_row_<type>_impl, what ggml_quantize_chunk runs when given an importance matrix),
// for the K-quants and IQ4 above and for Q4_0, Q4_1, Q5_0, Q5_1 (quantize_legacy_weighted.cpp):
//   per row, sigma2 = (sum of x^2 over the whole row, in float, in element order) / row length;
//   per 32-element block, weights w_j = imatrix_j * sqrt(sigma2 + x_j^2), then
//   Q4_0, Q5_0  make_qx_quants (the K-quants' symmetric fit, levels -8..7 or -16..15, the
//               element of largest magnitude at -8 or -16, then 18 trial steps), d = its
//               weighted least-squares scale; an all-zero block (max |x| < 1e-15) stores d = +0
//               and every nibble 0 (RTN stores -0 and 8);
//   Q4_1, Q5_1  make_qkx3_quants with 37 steps (-0.9 + 0.05 k), as Q4_K's weighted fit;
//               m = -(the fit's min), levels 0..15 or 0..31.
// Q8_0, F16, BF16 and F32 ignore the weights (llama.cpp's quantize_q8_0 does too).
// Checked byte for byte against ggml in tests/test_quantize_k.cpp, with and without weights.

// Errors: every function throws llmctl::Error for a type it cannot write, a row length that
// is not a whole number of blocks, or a NaN / Inf input value.

#include <cstdint>
#include <string>

#include "core/ggml_type.h"

namespace llmctl {

// Whether quantize_row() writes `type` (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K,
// Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4: every type the engine runs).
bool can_quantize(GgmlType type);

// Whether quantize_rows() uses column weights for `type` (Q4_0, Q4_1, Q5_0, Q5_1, k-quants,
// IQ4_NL, IQ4_XS).
bool uses_importance(GgmlType type);

// Bytes that n elements of `type` occupy (n a whole number of blocks; throws otherwise).
size_t quantized_size(GgmlType type, int64_t n);

// Encodes src[0..n) as `type` into dst (quantized_size(type, n) bytes, no alignment needed).
// Throws Error for an unsupported type, an n that is negative or not a multiple of the block
// size, or a NaN / Inf in src (naming its index).
void quantize_row(GgmlType type, const float* src, void* dst, int64_t n);

// The KV cache's encoder (kv_store): src[0..n) as Q8_0 or Q4_0 (n a multiple of 32) by the
// round-to-nearest rules above, quantize_row's bytes, but with no check of the values and no
// error: a NaN quantizes to q = 0 and an Inf gives d = inf (its block decodes to NaN), as the
// rules above define them.
void quantize_kv_row(GgmlType type, const float* src, void* dst, int64_t n);

// Encodes n_rows rows of row_len elements (row_len a whole number of blocks). col_weights
// (row_len,) weighs column j of every row in the block search (importance matrix: mean x_j^2
// of the activations that multiply column j; every weight finite and >= 0); nullptr gives
// exactly quantize_row's bytes. Throws Error for a NaN / Inf value (naming row and column)
// or a bad weight, before anything is written.
void quantize_rows(GgmlType type, const float* src, void* dst, int64_t n_rows, int64_t row_len,
                   const float* col_weights);

// Encodes a row-major [n_rows, row_len] tensor, row by row (row_len must be a whole number of
// blocks). A NaN or Inf throws an Error that names the tensor and the (row, column) of the
// first bad value, before anything is written to dst.
void quantize_tensor(GgmlType type, const std::string& name, const float* src, void* dst,
                     int64_t n_rows, int64_t row_len);

}  // namespace llmctl
