#pragma once
// The per-score math of kernels/attention_paged.cu as __host__ __device__ inline functions, so
// tests/gpu/test_kernel_math.cpp runs exactly this code on the CPU (no GPU needed): the online
// softmax step, the merge of the warps' partial softmaxes, and the score statistics.
//
// Online softmax (one warp's running max m and sum l over the scores it saw):
//   m' = max(m, s);  c = exp(m - m');  p = exp(s - m');  l' = l c + p
// (while every score so far is -inf: c = 1, p = 0, so a warp that sees only masked scores
// contributes nothing instead of exp(-inf - -inf) = NaN).
// Statistics per warp: max, min, sum and sum of squares (f64) of the finite scores, NaN and Inf
// counts, and for the entropy of the applied softmax
//   T = sum_j p_j (s_j - m),  rescaled like l when m grows:  T' = c (T + (m - m') l)
// so that with the merged L = sum_j p_j and T relative to the final max M:
//   H = -sum_j a_j ln a_j = ln L - T / L     (a_j = p_j / L)
// Terms with p_j = 0 (s_j = -inf or underflow) contribute 0, as 0 ln 0 = 0. Plain C math
// functions (expf, fmaf ...) and x != x for NaN, so host and device compile the same text.

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/activation_math.cuh"
#include "kernels/kernels.h"

namespace llmctl::cuda {

// The score the softmax receives from a dot product: dot * scale, soft-capped when softcap > 0
// (AttentionShape::softcap). Without a cap the expression is the one the kernels had before the
// option existed.
__host__ __device__ __forceinline__ float capped_score(float raw, float softcap) {
  return softcap > 0.0f ? softcap_f32(raw, softcap) : raw;
}
__host__ __device__ __forceinline__ float attention_score(float dot, float scale, float softcap) {
  return capped_score(dot * scale, softcap);
}

// The first position a query at `pos` sees (backend.h attention_first_position): 0, or
// pos - window + 1 with a window.
__host__ __device__ __forceinline__ int64_t attention_window_start(int64_t pos, int32_t window) {
  return window > 0 && pos >= window ? pos - window + 1 : 0;
}

// The first position j >= first with j % n == residue (0 <= residue < n): where warp / state
// `residue` of a query whose window starts at `first` begins.
__host__ __device__ __forceinline__ int64_t first_in_residue(int64_t first, int residue, int n) {
  return first + ((residue - first % n) % n + n) % n;
}

__host__ __device__ __forceinline__ bool is_nan(float x) { return x != x; }
__host__ __device__ __forceinline__ bool is_inf(float x) { return fabsf(x) == INFINITY; }

// One warp's statistics of the scores it saw. Plain data (it lives in shared memory, which
// allows no initializers): start from empty().
struct ScoreStats {
  float max, min;
  double sum, sum_sq;
  int n_nan, n_inf;
  float t;                 // sum_j p_j (s_j - m) relative to the warp's running max m
  float raw_max, raw_min;  // the scores before the soft-cap (add_raw)
  int n_raw_nonfinite;

  __host__ __device__ static ScoreStats empty() {
    return ScoreStats{-INFINITY, INFINITY, 0.0, 0.0, 0, 0, 0.0f, -INFINITY, INFINITY, 0};
  }
  // A score before the soft-cap (the same score when there is none).
  __host__ __device__ void add_raw(float raw) {
    if (is_nan(raw) || is_inf(raw)) {
      ++n_raw_nonfinite;
    } else {
      raw_max = fmaxf(raw_max, raw);
      raw_min = fminf(raw_min, raw);
    }
  }
  // Score s entered the online softmax: m -> m_new, c = exp(m - m_new), p = exp(s - m_new),
  // l_prev the sum of p before it.
  __host__ __device__ void add(float s, float m, float m_new, float c, float p, float l_prev) {
    if (is_nan(s)) {
      ++n_nan;
    } else if (is_inf(s)) {
      ++n_inf;
    } else {
      max = fmaxf(max, s);
      min = fminf(min, s);
      sum += static_cast<double>(s);
      sum_sq = fma(static_cast<double>(s), static_cast<double>(s), sum_sq);
    }
    // l_prev == 0: the first score (m = -inf, where (m - m_new) l_prev would be NaN).
    t = l_prev == 0.0f ? 0.0f : c * fmaf(m - m_new, l_prev, t);
    if (p > 0.0f) t = fmaf(p, s - m_new, t);
  }
};

struct SoftmaxStep {
  float c, p;  // the factor the accumulator is rescaled by, and the new score's weight
};

// One score s into a warp's online softmax (m, l); with kStats also into its statistics.
// Every multiply-add is an explicit fmaf, so this is the same arithmetic in every
// instantiation (attention() and attention_with_stats() give bit-identical outputs).
template <bool kStats>
__host__ __device__ __forceinline__ SoftmaxStep online_softmax_step(float s, float& m, float& l,
                                                                    ScoreStats& st) {
  const float m_new = fmaxf(m, s);
  // m_new = -inf: every score so far is -inf (or NaN, which fmaxf skips). exp(m - m_new) would
  // be exp(NaN): keep l and the accumulator as they are (c = 1), give a -inf score weight 0
  // (as exp(-inf - M) for the final max M) and a NaN score weight NaN (it poisons the softmax,
  // as it does on the CPU). Otherwise c = 0 on the first finite score (m = -inf).
  const bool none = m_new == -INFINITY;
  const float c = none ? 1.0f : expf(m - m_new);
  const float p = none ? (is_nan(s) ? s : 0.0f) : expf(s - m_new);
  if constexpr (kStats) st.add(s, m, m_new, c, p, l);
  l = fmaf(l, c, p);
  m = m_new;
  return SoftmaxStep{c, p};
}

// Merging n_warps partial softmaxes (m[w], l[w]) in warp order: factor[w] = exp(m[w] - M) for
// warps that saw a score (l > 0), else 0; returns the total sum L = sum_w l[w] factor[w].
__host__ __device__ __forceinline__ float merge_softmax(const float* m, const float* l, int n_warps,
                                                        float& big_m, float* factor) {
  big_m = m[0];
  for (int w = 1; w < n_warps; ++w) big_m = fmaxf(big_m, m[w]);
  float total = 0.0f;
  for (int w = 0; w < n_warps; ++w) {
    factor[w] = l[w] > 0.0f ? expf(m[w] - big_m) : 0.0f;
    total = fmaf(l[w], factor[w], total);
  }
  return total;
}

// The merged softmax sum `total` (relative to the merged max big_m) with an attention sink:
//   total + exp(sink - big_m)
// the CPU's softmax_sink_inplace up to where the max is taken (there: max(big_m, sink); a sink
// far above every score gives exp(...) = inf here and so an output of 0, its limit).
// sinks == nullptr: total unchanged.
__host__ __device__ __forceinline__ float add_sink(float total, float big_m, const float* sinks,
                                                   int64_t head) {
  return sinks == nullptr ? total : total + expf(sinks[head] - big_m);
}

// The kAttnFieldsPerHead statistics of one (token, head) from its warps' ScoreStats and
// partial softmaxes (merged as merge_softmax did: big_m, total), n_scores = position + 1.
__host__ __device__ inline void write_attention_stats(const ScoreStats* warps, const float* m,
                                                      const float* l, int n_warps, float big_m,
                                                      float total, int64_t n_scores, float* out,
                                                      float denom = -1.0f) {
  // denom: the softmax's denominator when it exceeds total (add_sink), else total; the
  // applied a_j = p_j / denom, so H = (total / denom) ln denom - T / denom.
  if (denom < 0.0f) denom = total;
  ScoreStats all = ScoreStats::empty();
  float t_all = 0.0f;
  for (int w = 0; w < n_warps; ++w) {
    const ScoreStats& ws = warps[w];
    all.max = fmaxf(all.max, ws.max);
    all.min = fminf(all.min, ws.min);
    all.sum += ws.sum;
    all.sum_sq += ws.sum_sq;
    all.n_nan += ws.n_nan;
    all.n_inf += ws.n_inf;
    all.raw_max = fmaxf(all.raw_max, ws.raw_max);
    all.raw_min = fminf(all.raw_min, ws.raw_min);
    all.n_raw_nonfinite += ws.n_raw_nonfinite;
    // A warp without scores has l = 0 and adds nothing; a NaN l (NaN or +inf scores) makes
    // the entropy NaN, as the softmax is.
    if (l[w] != 0.0f) t_all = fmaf(expf(m[w] - big_m), fmaf(m[w] - big_m, l[w], ws.t), t_all);
  }
  out[kAttnFieldMax] = all.max;
  out[kAttnFieldMin] = all.min;
  out[kAttnFieldSum] = static_cast<float>(all.sum);
  out[kAttnFieldSumSq] = static_cast<float>(all.sum_sq);
  out[kAttnFieldNan] = static_cast<float>(all.n_nan);
  out[kAttnFieldInf] = static_cast<float>(all.n_inf);
  out[kAttnFieldEntropy] = (total / denom) * logf(denom) - t_all / denom;
  out[kAttnFieldCount] = static_cast<float>(n_scores);
  out[kAttnFieldRawMax] = all.raw_max;
  out[kAttnFieldRawMin] = all.raw_min;
  out[kAttnFieldRawNonFinite] = static_cast<float>(all.n_raw_nonfinite);
}

}  // namespace llmctl::cuda
