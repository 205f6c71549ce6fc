#pragma once
// The fast CPU attention's softmax (attention_fast.cpp): core/softmax.h's definition with the
// exponential computed 8 lanes at a time, for the scores of one (token, head).
//
//   y[i] = exp(x[i] - max(x)) / sum_j exp(x[j] - max(x))
//
// exp_avx2 is a polynomial on the reduced argument (Cephes' expf: x = n ln2 + r, |r| <= ln2/2,
// degree-7 polynomial, times 2^n), within a few float ulps of exp for x in [-87, 0] (tested
// against double exp); below -87 it gives 0 (exp is < 2^-125 there, nothing next to the
// softmax's largest term, which is 1). The max ignores NaN entries except a leading one, as
// softmax_inplace's does; a NaN entry makes the row NaN and a -inf entry gives 0, as there. The
// sum is in double, as there, but in 8 partial sums: results differ from softmax_inplace by
// rounding only. Only on a CPU with AVX2 and FMA (attention_fast_available()).

#include <cstdint>

namespace llmctl::cpu {

// Softmax of x[0..n) in place, n >= 1. With `sink` non-null, *sink joins the max and the
// denominator as in core/softmax.h softmax_sink_inplace (attention sinks, gpt-oss).
void softmax_fast(float* x, int64_t n, const float* sink = nullptr);

// exp of x[0..n) into y (tests): the lanes softmax_fast uses.
void exp_fast(const float* x, int64_t n, float* y);

}  // namespace llmctl::cpu
