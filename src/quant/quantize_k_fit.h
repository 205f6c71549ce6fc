#pragma once
// Internal to quant/: the per-group level fits behind the K-quant and IQ4 encoders
// (quantize_k.cpp, quantize_iq4.cpp). Each follows one of llama.cpp's helpers in
// ggml/src/ggml-quants.c operation for operation (named beside each function below), in
// float with one rounding per operation and no fused multiply-add (quant/CMakeLists flags
// and quantize.h), so the encoders built on them write llama.cpp's bytes.
//
// "Levels" are the small integers stored per element; a group is a sub-block of 16 or 32
// elements (or, for the second-level fits, the 8 or 16 sub-block scales of a super-block).

#include <cstdint>

namespace llmctl::quant_detail {

// Round to nearest, ties to even, by adding 1.5 * 2^23 and reading the low mantissa bits
// (ggml's nearest_int). Exact for |v| <= 4194303; beyond that it returns the same wrapped
// value ggml's does (ggml only asserts the range in debug builds).
int nearest_level(float v);

// The element of largest magnitude, with its sign (the first of equals; 0 for n == 0 or all
// zero). ggml's "max" of make_qx_quants and its callers.
float signed_max(const float* x, int n);

// Affine fit x ~ scale * L - min_out, L in 0..nmax, min_out >= 0, minimizing the weighted
// squared (or absolute, use_mad) error: the rounding of x to nmax steps over [min(x,0), max],
// then nstep + 1 trial step counts nmax + rmin + rdelta * k, each refitted by weighted least
// squares (with the offset clamped to <= 0) and kept when its error is smaller.
// make_qkx2_quants (with_x2_default false: weights must be given) or make_qkx3_quants
// (with_x2_default true: weights == nullptr means w = x^2; the all-equal test is max <= min
// and the trial levels are taken as v > 0 ? round(min(v, nmax)) : 0, so a trial with a
// huge or NaN step cannot leave 0..nmax). Returns the scale; L gets the levels.
float fit_affine_levels(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                        float* min_out, float rmin, float rdelta, int nstep, bool use_mad,
                        bool with_x2_default);

// Symmetric fit x ~ scale * (L - nmax), L - nmax in -nmax..nmax-1, the element of largest
// magnitude mapped to -nmax: the weighted least-squares scale for that rounding (weights qw,
// or w = x^2 when qw is nullptr: make_qx_quants' rmse_type 1), then 18 trial step counts
// nmax + 0.1 k (k = -9..9, k != 0), kept when they raise sumlx^2 / suml2. make_qx_quants.
// An all-zero group (max |x| < 1e-15) gives scale 0 and L = 0.
float fit_symmetric_levels(int n, int nmax, const float* x, int8_t* L, const float* qw);

// Q3_K's unweighted symmetric fit (make_q3_quants with do_rmse): w = x^2, rounding to
// -nmax..nmax-1 of x * (-nmax / max), then up to 5 passes moving one level at a time while
// that raises sumlx^2 / suml2. L gets level + nmax.
float fit_q3_levels(int n, int nmax, const float* x, int8_t* L);

// Fit of non-negative values x (sub-block scales or mins) as scale * L, L in 0..nmax, with
// weights qw: the best of 9 step counts nmax + 0.1 k (k = -4..4), then up to 5 passes of
// single-level moves (make_qp_quants). Returns the scale (0 and L = 0 when max x < 1e-15).
float fit_positive_levels(int n, int nmax, const float* x, uint8_t* L, const float* qw);

}  // namespace llmctl::quant_detail
