// attention_paged: causal attention of each query token over its sequence's cached positions
// in the paged KV cache (backend.h PagedKv), optionally with statistics of the scores. One
// thread block of kWarps warps per (head, token); no score matrix is ever stored.
//
// Warp w walks positions j = w, w + kWarps, ... in order; the lanes split head_dim (lane l holds
// elements l, l + 32, ... of q, of the accumulator and of each K/V row it reads), the score
// q . K[j] / sqrt(head_dim) is a warp-shuffle sum, and the warp keeps an online softmax in f32:
//   m' = max(m, s);  c = exp(m - m');  l = l c + exp(s - m');  acc = acc c + exp(s - m') V[j]
// With a window, positions before p - window + 1 are never read; a soft-cap maps each score s to
// softcap * tanh(s / softcap) before the online softmax (attention_math.cuh attention_score).
// The kWarps partial results are merged in warp order at the end (exp(m_w - M) rescaling), so
// the result is deterministic and independent of n_tokens and of the token's place in the batch.
// Indices outside the block table or the pool raise the device error flag and read nothing.
//
// Statistics (kStats): the same kernel and the same arithmetic for `out` (attention_math.cuh:
// every multiply-add an explicit fmaf, so out is bit-identical to plain attention's), plus per
// warp the statistics of its scores (ScoreStats), merged by thread 0 at the end.

#include "kernels/attention_math.cuh"
#include "kernels/attention_tile_math.cuh"
#include "kernels/common.cuh"
#include "kernels/kernels.h"
#include "kernels/kv_pool.cuh"

namespace llmctl::cuda {

namespace {

constexpr int kWarps = 4;
// attention_prefill.cu repeats this kernel's arithmetic with one softmax state per warp here:
// the two must agree for its outputs to stay bit-identical to this kernel's.
static_assert(kWarps == kPrefillResidues, "attention_prefill.cu keeps kWarps softmax states");

__device__ __forceinline__ float quiet_nan() { return __int_as_float(0x7fc00000); }

// RK, RV: the K and V pools' readers (kv_pool.cuh).
template <class RK, class RV, bool kStats>
static __global__ void attention_paged_kernel(
    const float* __restrict__ q, const RK rk, const RV rv, int64_t n_slots, int64_t block_size, const int32_t* __restrict__ block_table,
    int64_t n_seq_rows, int64_t max_blocks, const int32_t* __restrict__ token_seq,
    const int32_t* __restrict__ positions, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim,
    float scale, float softcap, int32_t window, const float* __restrict__ sinks,
    float* __restrict__ out, float* __restrict__ stats, int* error_flag) {
  __shared__ float s_m[kWarps], s_l[kWarps];
  __shared__ float s_acc[kWarps][kAttentionMaxHeadDim];
  __shared__ ScoreStats s_stats[kStats ? kWarps : 1];
  const int64_t h = blockIdx.x;
  const int64_t t = blockIdx.y;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int32_t row = token_seq[t];
  const int32_t pos = positions[t];
  float* oh = out + (t * n_heads + h) * head_dim;
  float* sh = kStats ? stats + (t * n_heads + h) * kAttnFieldsPerHead : nullptr;
  if (row < 0 || row >= n_seq_rows || pos < 0 || pos / block_size >= max_blocks) {
    if (threadIdx.x == 0) atomicCAS(error_flag, 0, kDeviceErrorAttentionIndex);
    for (int64_t i = threadIdx.x; i < head_dim; i += blockDim.x) oh[i] = quiet_nan();
    if (kStats && threadIdx.x < kAttnFieldsPerHead) sh[threadIdx.x] = quiet_nan();
    return;
  }
  const int32_t* blocks = block_table + static_cast<int64_t>(row) * max_blocks;
  const int64_t g = h / (n_heads / n_kv_heads);
  constexpr int kPerLane = kAttentionMaxHeadDim / kWarpSize;
  const float* qh = q + (t * n_heads + h) * head_dim;
  float qr[kPerLane], acc[kPerLane];
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    const int64_t i = lane + k * kWarpSize;
    qr[k] = i < head_dim ? qh[i] : 0.0f;
    acc[k] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  ScoreStats st = ScoreStats::empty();
  bool bad = false;
  // Position j goes to warp j % kWarps, with or without a window (attention_prefill.cu relies
  // on it); the window only moves where each warp starts.
  const int64_t first = attention_window_start(pos, window);
  for (int64_t j = first_in_residue(first, warp, kWarps); j <= pos; j += kWarps) {
    const int32_t b = blocks[j / block_size];
    const int64_t slot = static_cast<int64_t>(b) * block_size + j % block_size;
    if (b < 0 || slot >= n_slots) {
      bad = true;
      continue;
    }
    const typename RK::Head kj = rk.head(slot, g);
    const typename RV::Head vj = rv.head(slot, g);
    float dot = 0.0f;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int64_t i = lane + k * kWarpSize;
      if (i < head_dim) dot = fmaf(qr[k], rk.at(kj, i), dot);
    }
    // attention_score's arithmetic, with the score before the cap kept for the statistics.
    const float raw = warp_reduce_sum(dot) * scale;
    const float s = capped_score(raw, softcap);
    if constexpr (kStats) st.add_raw(raw);
    const SoftmaxStep step = online_softmax_step<kStats>(s, m, l, st);
    const float c = step.c, p = step.p;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int64_t i = lane + k * kWarpSize;
      if (i < head_dim) acc[k] = fmaf(p, rv.at(vj, i), acc[k] * c);
    }
  }
  if (bad && lane == 0) atomicCAS(error_flag, 0, kDeviceErrorAttentionIndex);
  if (lane == 0) {
    s_m[warp] = m;
    s_l[warp] = l;
    if constexpr (kStats) s_stats[warp] = st;
  }
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) s_acc[warp][lane + k * kWarpSize] = acc[k];
  __syncthreads();
  // Merge the warps' partial softmaxes in warp order; the warp holding position pos saw a score
  // (a warp that saw none has l = 0 and weight 0).
  float big_m = 0.0f, factor[kWarps];
  const float total = merge_softmax(s_m, s_l, kWarps, big_m, factor);
  const float denom = add_sink(total, big_m, sinks, h);
  const float inv = 1.0f / denom;
  for (int64_t i = threadIdx.x; i < head_dim; i += blockDim.x) {
    float sum = 0.0f;
    for (int w = 0; w < kWarps; ++w) sum = fmaf(s_acc[w][i], factor[w], sum);
    oh[i] = sum * inv;
  }
  if constexpr (kStats) {
    if (threadIdx.x == 0)
      write_attention_stats(s_stats, s_m, s_l, kWarps, big_m, total, int64_t{pos} + 1 - first, sh,
                            denom);
  }
}

template <bool kStats, class RK, class RV>
void launch(const float* q, const RK& rk, const RV& rv, const PagedAttentionArgs& a, float* out,
            float* stats, int* error_flag, cudaStream_t stream) {
  if (a.n_tokens <= 0 || a.n_heads <= 0) return;
  const dim3 grid(static_cast<unsigned>(a.n_heads), static_cast<unsigned>(a.n_tokens));
  attention_paged_kernel<RK, RV, kStats><<<grid, kWarps * kWarpSize, 0, stream>>>(
      q, rk, rv, a.n_slots, a.block_size, a.block_table, a.n_seq_rows, a.max_blocks, a.token_seq,
      a.positions, a.n_heads, a.n_kv_heads, a.head_dim, a.scale, a.softcap, a.window, a.sinks, out,
      stats, error_flag);
}

template <class Pool>
auto reader(Pool pool, const PagedAttentionArgs& a) {
  return kv_reader(pool, a.n_kv_heads * a.head_dim, a.head_dim);
}

}  // namespace

void launch_attention_paged_f32(const float* q, const float* k_pool, const float* v_pool,
                                const PagedAttentionArgs& args, float* out, int* error_flag,
                                cudaStream_t stream) {
  launch<false>(q, reader(k_pool, args), reader(v_pool, args), args, out, nullptr, error_flag,
                stream);
}

void launch_attention_paged_f16(const float* q, const uint16_t* k_pool, const uint16_t* v_pool,
                                const PagedAttentionArgs& args, float* out, int* error_flag,
                                cudaStream_t stream) {
  launch<false>(q, reader(k_pool, args), reader(v_pool, args), args, out, nullptr, error_flag,
                stream);
}

void launch_attention_paged_any(const float* q, KvPoolView k_pool, KvPoolView v_pool,
                                const PagedAttentionArgs& args, float* out, int* error_flag,
                                cudaStream_t stream) {
  launch<false>(q, reader(k_pool, args), reader(v_pool, args), args, out, nullptr, error_flag,
                stream);
}

void launch_attention_paged_stats_f32(const float* q, const float* k_pool, const float* v_pool,
                                      const PagedAttentionArgs& args, float* out, float* stats,
                                      int* error_flag, cudaStream_t stream) {
  launch<true>(q, reader(k_pool, args), reader(v_pool, args), args, out, stats, error_flag,
               stream);
}

void launch_attention_paged_stats_f16(const float* q, const uint16_t* k_pool,
                                      const uint16_t* v_pool, const PagedAttentionArgs& args,
                                      float* out, float* stats, int* error_flag,
                                      cudaStream_t stream) {
  launch<true>(q, reader(k_pool, args), reader(v_pool, args), args, out, stats, error_flag,
               stream);
}

void launch_attention_paged_stats_any(const float* q, KvPoolView k_pool, KvPoolView v_pool,
                                      const PagedAttentionArgs& args, float* out, float* stats,
                                      int* error_flag, cudaStream_t stream) {
  launch<true>(q, reader(k_pool, args), reader(v_pool, args), args, out, stats, error_flag,
               stream);
}

}  // namespace llmctl::cuda
