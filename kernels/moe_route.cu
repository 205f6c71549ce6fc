// moe_route: each token's k experts and their weights from its router logits (kernels.h
// contract, backend.h "mixture of experts"). One warp per token; k and n_expert are small
// (top-2 of 8 to top-8 of 128), so the row is re-read from global memory (L1) instead of
// being staged.
//
// Softmax as core/softmax.h computes it, step for step: the max, then p_e = expf(x_e - max)
// (one f32 subtraction), their sum in double, inv = (float)(1 / sum) and p_e * inv, every step
// IEEE-rounded (sub_rn, mul_rn: no contraction). Only the order of the double sum and
// expf's last bit can differ from the CPU. A NaN anywhere in the row makes the sum, and so
// every p, NaN, as on the CPU.
//
// Ranking: top_k_key (top_k_key.cuh) gives each (p, expert) a distinct key in the contract's
// order (larger p first, equal p the lower expert first, NaN last). Rank r is the largest key
// below rank r - 1's: k warp-max reductions and no marking of chosen experts. p_e is recomputed
// from the logit by the same expression where it is needed, so it has the same bits each time.
//
// Weights: p of each chosen expert in rank order; with `normalize`, each divided (__fdiv_rn)
// by max(sum in rank order, 6.103515625e-5) (a NaN sum stays NaN, as std::max keeps it).

#include "kernels/common.cuh"
#include "kernels/kernels.h"
#include "kernels/rope_math.cuh"  // mul_rn, add_rn, sub_rn
#include "kernels/top_k_key.cuh"

namespace llmctl::cuda {

namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kThreads = kWarpsPerBlock * kWarpSize;
constexpr float kMinWeightSum = 6.103515625e-5f;  // llama.cpp's clamp of the top-k sum

__device__ __forceinline__ float warp_reduce_max(float v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    v = fmaxf(v, __shfl_xor_sync(kFullWarpMask, v, offset));
  return v;
}

__device__ __forceinline__ double warp_reduce_sum_f64(double v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    v += __shfl_xor_sync(kFullWarpMask, v, offset);
  return v;
}

__device__ __forceinline__ TopKKey warp_reduce_max_key(TopKKey v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    const TopKKey o = __shfl_xor_sync(kFullWarpMask, v, offset);
    v = o > v ? o : v;
  }
  return v;
}

// exp(x - max) before the normalisation: the same bits wherever it is evaluated.
__device__ __forceinline__ float unnormalized(float x, float max_v) {
  return expf(sub_rn(x, max_v));
}

static __global__ void moe_route_kernel(const float* __restrict__ logits, int64_t n_tokens,
                                        int64_t n_expert, int64_t k, bool normalize,
                                        int32_t* __restrict__ ids, float* __restrict__ weights) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  if (t >= n_tokens) return;  // the whole warp leaves together
  const int lane = static_cast<int>(threadIdx.x % kWarpSize);
  const float* row = logits + t * n_expert;

  // fmaxf ignores NaN; a NaN logit still makes the row NaN through the sum below.
  float max_v = -INFINITY;
  for (int64_t e = lane; e < n_expert; e += kWarpSize) max_v = fmaxf(max_v, row[e]);
  max_v = warp_reduce_max(max_v);
  double sum = 0.0;
  for (int64_t e = lane; e < n_expert; e += kWarpSize)
    sum += static_cast<double>(unnormalized(row[e], max_v));
  sum = warp_reduce_sum_f64(sum);
  const auto inv = static_cast<float>(1.0 / sum);

  int32_t* id = ids + t * k;
  float* w = weights + t * k;
  TopKKey below = ~TopKKey{0};  // rank r takes the largest key below rank r - 1's
  float w_sum = 0.0f;
  for (int64_t r = 0; r < k; ++r) {
    TopKKey best = 0;  // no key is 0 (top_k_key.cuh)
    for (int64_t e = lane; e < n_expert; e += kWarpSize) {
      const TopKKey key = top_k_key(mul_rn(unnormalized(row[e], max_v), inv), e);
      if (key < below && key > best) best = key;
    }
    best = warp_reduce_max_key(best);
    below = best;
    const int32_t chosen = top_k_key_index(best);
    const float p = mul_rn(unnormalized(row[chosen], max_v), inv);
    w_sum = add_rn(w_sum, p);
    if (lane == 0) {
      id[r] = chosen;
      w[r] = p;
    }
  }
  if (!normalize || lane != 0) return;
  const float d = w_sum < kMinWeightSum ? kMinWeightSum : w_sum;
  for (int64_t r = 0; r < k; ++r) w[r] = __fdiv_rn(w[r], d);
}

}  // namespace

void launch_moe_route_f32(const float* logits, int64_t n_tokens, int64_t n_expert, int64_t k,
                          bool normalize, int32_t* ids, float* weights, cudaStream_t stream) {
  if (n_tokens <= 0 || n_expert <= 0 || k <= 0) return;
  const auto blocks = static_cast<unsigned>((n_tokens + kWarpsPerBlock - 1) / kWarpsPerBlock);
  moe_route_kernel<<<blocks, kThreads, 0, stream>>>(logits, n_tokens, n_expert, k, normalize, ids,
                                                    weights);
}

}  // namespace llmctl::cuda
