// top_k: the k largest logits of each row, for sampling on the device (kernels.h contract).
// One thread block per row.
//
// Ranking key (top_k_key.cuh): a distinct 64-bit key per (value, index) whose order is the
// contract's, so "the k largest keys" is exactly the answer and ties cannot occur.
//
// k = 1: each thread keeps its largest key, then a warp-shuffle and a shared-memory max.
// k > 1: radix select of the k-th largest key, 8 bits per pass from the top (8 passes over the
// row, a 256-bin shared histogram of the keys that match the digits chosen so far, one atomic
// per bin and warp via __match_any_sync), then every
// key >= that threshold (exactly k) is collected and bitonic-sorted in descending order, in
// shared memory for k <= kTopKSharedKeys, else in the caller's global scratch (one row of
// next_pow2(k) keys per block; __syncthreads orders the block's global accesses as well).

#include "kernels/common.cuh"
#include "kernels/kernels.h"
#include "kernels/top_k_key.cuh"

namespace llmctl::cuda {

namespace {

constexpr int kThreads = 256;
using Key = TopKKey;

__device__ __forceinline__ Key warp_reduce_max_key(Key v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    const Key o = __shfl_xor_sync(kFullWarpMask, v, offset);
    v = o > v ? o : v;
  }
  return v;
}

int64_t next_pow2(int64_t k) {
  int64_t p = 1;
  while (p < k) p *= 2;
  return p;
}

static __global__ void argmax_kernel(const float* __restrict__ logits, int64_t n_cols,
                                     int32_t* __restrict__ ids, float* __restrict__ values) {
  __shared__ Key s_best[kThreads / kWarpSize];
  const int64_t r = blockIdx.x;
  const float* row = logits + r * n_cols;
  Key best = 0;
  for (int64_t i = threadIdx.x; i < n_cols; i += blockDim.x) {
    const Key key = top_k_key(row[i], i);
    best = key > best ? key : best;
  }
  best = warp_reduce_max_key(best);
  if (threadIdx.x % kWarpSize == 0) s_best[threadIdx.x / kWarpSize] = best;
  __syncthreads();
  if (threadIdx.x != 0) return;
  for (int w = 1; w < kThreads / kWarpSize; ++w) best = s_best[w] > best ? s_best[w] : best;
  const int32_t id = top_k_key_index(best);
  ids[r] = id;
  values[r] = row[id];
}

// Descending bitonic sort of keys[0 .. n), n a power of two, by the whole block.
__device__ void bitonic_sort_desc(Key* keys, int64_t n) {
  for (int64_t size = 2; size <= n; size *= 2) {
    for (int64_t stride = size / 2; stride > 0; stride /= 2) {
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        const int64_t j = i ^ stride;
        if (j <= i) continue;
        const bool desc = (i & size) == 0;
        const Key a = keys[i], b = keys[j];
        if (desc ? a < b : a > b) {
          keys[i] = b;
          keys[j] = a;
        }
      }
      __syncthreads();
    }
  }
}

static __global__ void top_k_kernel(const float* __restrict__ logits, int64_t n_cols, int64_t k,
                                    int64_t padded, Key* __restrict__ scratch,
                                    int32_t* __restrict__ ids, float* __restrict__ values) {
  __shared__ Key s_keys[kTopKSharedKeys];
  __shared__ unsigned int s_hist[256];
  __shared__ Key s_prefix, s_mask;
  __shared__ int64_t s_remaining;  // rank of the k-th key among those matching the prefix
  __shared__ unsigned int s_count;
  const int64_t r = blockIdx.x;
  const float* row = logits + r * n_cols;
  Key* keys = padded <= kTopKSharedKeys ? s_keys : scratch + r * padded;
  if (threadIdx.x == 0) {
    s_prefix = 0;
    s_mask = 0;
    s_remaining = k;
    s_count = 0;
  }
  for (int shift = 56; shift >= 0; shift -= 8) {
    for (int b = static_cast<int>(threadIdx.x); b < 256; b += static_cast<int>(blockDim.x))
      s_hist[b] = 0;
    __syncthreads();  // also publishes thread 0's prefix, mask and remaining
    const Key prefix = s_prefix, mask = s_mask;
    // Uniform trip count per warp, so the lanes that share a bin can be counted with one
    // atomic by their leader (the top digits of logits fall into a handful of bins).
    for (int64_t base = 0; base < n_cols; base += blockDim.x) {
      const int64_t i = base + threadIdx.x;
      const Key key = i < n_cols ? top_k_key(row[i], i) : 0;
      const bool hit = i < n_cols && (key & mask) == prefix;
      const unsigned int bin = hit ? static_cast<unsigned int>((key >> shift) & 0xff) : 256u;
      const unsigned int peers = __match_any_sync(kFullWarpMask, bin);
      const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
      if (hit && lane == __ffs(static_cast<int>(peers)) - 1)
        atomicAdd(&s_hist[bin], static_cast<unsigned int>(__popc(peers)));
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      // The digit holding the target: walk the bins from the top, skipping whole bins.
      int64_t rem = s_remaining;
      int d = 255;
      for (; d > 0; --d) {
        if (rem <= static_cast<int64_t>(s_hist[d])) break;
        rem -= s_hist[d];
      }
      s_remaining = rem;
      s_prefix = prefix | (static_cast<Key>(d) << shift);
      s_mask = mask | (Key{0xff} << shift);
    }
  }
  __syncthreads();
  const Key threshold = s_prefix;  // the k-th largest key: exactly k keys are >= it
  for (int64_t i = threadIdx.x; i < n_cols; i += blockDim.x) {
    const Key key = top_k_key(row[i], i);
    if (key >= threshold) {
      const unsigned int at = atomicAdd(&s_count, 1u);
      if (at < k) keys[at] = key;
    }
  }
  for (int64_t i = k + threadIdx.x; i < padded; i += blockDim.x) keys[i] = 0;
  __syncthreads();
  bitonic_sort_desc(keys, padded);
  for (int64_t j = threadIdx.x; j < k; j += blockDim.x) {
    const int32_t id = top_k_key_index(keys[j]);
    ids[r * k + j] = id;
    values[r * k + j] = row[id];
  }
}

}  // namespace

size_t top_k_scratch_bytes(int64_t n_rows, int64_t k) {
  const int64_t padded = next_pow2(k);
  if (padded <= kTopKSharedKeys) return 0;
  return static_cast<size_t>(n_rows) * static_cast<size_t>(padded) * sizeof(Key);
}

void launch_top_k_f32(const float* logits, int64_t n_rows, int64_t n_cols, int64_t k, void* scratch,
                      int32_t* ids, float* values, cudaStream_t stream) {
  if (n_rows <= 0 || n_cols <= 0 || k <= 0) return;
  const auto blocks = static_cast<unsigned>(n_rows);
  if (k == 1) {
    argmax_kernel<<<blocks, kThreads, 0, stream>>>(logits, n_cols, ids, values);
    return;
  }
  top_k_kernel<<<blocks, kThreads, 0, stream>>>(logits, n_cols, k, next_pow2(k),
                                                static_cast<Key*>(scratch), ids, values);
}

}  // namespace llmctl::cuda
