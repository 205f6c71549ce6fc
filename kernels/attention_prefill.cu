// attention_prefill: causal attention of a batch of query tokens over the paged KV cache
// (backend.h PagedKv) with K/V staged in shared memory, for prefill. Same contract and same
// result, bit for bit, as attention_paged.cu (kernels.h); index math and the argument for the
// bitwise equality in kernels/attention_tile_math.cuh.
//
// Block (tile, y): KV head g = y / head_chunks, a tile of consecutive batch tokens times some of
// g's query heads, one warp per (token, head) pair (plan_prefill). The tile's good tokens are
// collected first (collect_tile_rows). All of one sequence (a prefill chunk): the block walks
// that sequence's positions 0 .. (largest position of its tokens) in tiles of kv_rows:
//   1. every thread: s_slot[jj] = pool slot of position j0 + jj, or -1 (bad block, past the end)
//   2. every thread: s_k, s_v (kv_rows, head_dim) f32 = the K/V rows of head g at those slots
//   3. each warp, its token at position p: positions j0 .. min(p, j0 + kv_rows - 1), in order,
//      position j into its online softmax state j % 4 (registers, attend()):
//        s = (q . K[j]) * scale   (lane l: elements l, l + 32, ...; fmaf chain, warp-shuffle sum)
//        m' = max(m, s); c = exp(m - m'); p = exp(s - m'); l = l c + p; acc = acc c + p V[j]
// With a window (a.window > 0) each query starts at its window's first position and the block
// stages from the earliest start among its tokens; a soft-cap is applied to each score as in
// attention_paged.cu (attention_score).
// Tokens of several sequences in one tile (decode batches, chunk boundaries, interleaved
// batches): each warp walks its own positions 0 .. p from global memory, the same states in the
// same order, without block-wide syncs. At the end each warp merges its 4 states in order
// (merge_softmax) and writes its head. Nothing is shared between pairs except staged K/V values,
// so a pair's result does not depend on the other tokens of the batch or on its place in it.
//
// Shared memory: 2 x kPrefillTileFloats floats (32 KiB) + slots and the tile's tokens, static,
// under the 48 KiB that needs no opt-in. Registers per lane: q (8), 4 accumulators (32), 4
// (m, l); 512 threads at most, so __launch_bounds__ caps them at 128 (ptxas: ~100, no spills).
//
// Errors as attention_paged.cu: a token whose sequence row or position is out of range gets a
// NaN head; a bad block or slot skips that position; both set kDeviceErrorAttentionIndex.

#include "kernels/attention_math.cuh"
#include "kernels/attention_tile_math.cuh"
#include "kernels/common.cuh"
#include "kernels/kernels.h"
#include "kernels/kv_pool.cuh"

namespace llmctl::cuda {

namespace {

constexpr int kMaxThreads = kPrefillMaxWarps * kWarpSize;
constexpr int kPerLane = kAttentionMaxHeadDim / kWarpSize;  // head elements per lane

// Staged rows in shared memory, read like a pool (kv_pool.cuh's reader interface).
struct StagedRead {
  using Head = const float*;
  __device__ __forceinline__ float at(Head h, int64_t i) const { return h[i]; }
};

// One position into state (m, l, acc) of a warp's query q (lane: elements lane + 32 k), K/V
// heads kj, vj read through rk, rv (staged f32 rows, or the pools'):
// attention_paged.cu's statements in its order.
template <class RK, class RV>
__device__ __forceinline__ void attend(const RK& rk, typename RK::Head kj, const RV& rv,
                                       typename RV::Head vj, const float (&qr)[kPerLane],
                                       float scale, float softcap, int lane, int head_dim, float& m,
                                       float& l, float (&acc)[kPerLane]) {
  float dot = 0.0f;
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    const int i = lane + k * kWarpSize;
    if (i < head_dim) dot = fmaf(qr[k], rk.at(kj, i), dot);
  }
  const float s = attention_score(warp_reduce_sum(dot), scale, softcap);
  ScoreStats unused = ScoreStats::empty();  // online_softmax_step<false> never touches it
  const SoftmaxStep step = online_softmax_step<false>(s, m, l, unused);
  const float c = step.c, p = step.p;
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    const int i = lane + k * kWarpSize;
    if (i < head_dim) acc[k] = fmaf(p, rv.at(vj, i), acc[k] * c);
  }
}

template <class RK, class RV>
static __global__ void __launch_bounds__(kMaxThreads)
    attention_prefill_kernel(const float* __restrict__ q, const RK rk, const RV rv,
                             const PagedAttentionArgs a,
                             const PrefillPlan plan, float* __restrict__ out, int* error_flag) {
  __shared__ float s_k[kPrefillTileFloats], s_v[kPrefillTileFloats];
  __shared__ int64_t s_slot[kPrefillMaxKvRows];
  __shared__ int32_t s_tok_row[kPrefillMaxWarps], s_tok_pos[kPrefillMaxWarps];
  __shared__ bool s_tok_ok[kPrefillMaxWarps];
  __shared__ TileRows s_rows;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const PrefillPair pair =
      prefill_pair(plan, blockIdx.x, blockIdx.y, warp, a.n_tokens, a.n_heads, a.n_kv_heads);
  const int head_dim = static_cast<int>(a.head_dim);

  // This warp's token; a bad one gets its NaN head now and computes nothing.
  int32_t row = -1, pos = -1;
  int64_t first = 0;  // the first position this warp's query sees (its window's start)
  bool ok = false;
  if (pair.active) {
    row = a.token_seq[pair.token];
    pos = a.positions[pair.token];
    ok = attention_token_ok(row, pos, a.n_seq_rows, a.block_size, a.max_blocks);
    first = ok ? attention_window_start(pos, a.window) : 0;
    if (!ok) {
      if (lane == 0) atomicCAS(error_flag, 0, kDeviceErrorAttentionIndex);
      float* oh = out + (pair.token * a.n_heads + pair.head) * a.head_dim;
      for (int i = lane; i < head_dim; i += kWarpSize) oh[i] = __int_as_float(0x7fc00000);
    }
  }
  if (threadIdx.x == 0) {  // the block's tokens (in shared memory: no per-thread stack)
    int n_tok = 0;
    for (int i = 0; i < plan.tokens_per_block; ++i) {
      const int64_t t = static_cast<int64_t>(blockIdx.x) * plan.tokens_per_block + i;
      if (t >= a.n_tokens) break;
      s_tok_row[n_tok] = a.token_seq[t];
      s_tok_pos[n_tok] = a.positions[t];
      s_tok_ok[n_tok] = attention_token_ok(s_tok_row[n_tok], s_tok_pos[n_tok], a.n_seq_rows,
                                           a.block_size, a.max_blocks);
      ++n_tok;
    }
    collect_tile_rows(s_tok_row, s_tok_pos, s_tok_ok, n_tok, s_rows);
  }

  float qr[kPerLane], acc[kPrefillResidues][kPerLane], m[kPrefillResidues], l[kPrefillResidues];
  const float* qh =
      pair.active && ok ? q + (pair.token * a.n_heads + pair.head) * a.head_dim : nullptr;
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    const int i = lane + k * kWarpSize;
    qr[k] = qh != nullptr && i < head_dim ? qh[i] : 0.0f;
  }
#pragma unroll
  for (int w = 0; w < kPrefillResidues; ++w) {
    m[w] = -INFINITY;
    l[w] = 0.0f;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) acc[w][k] = 0.0f;
  }
  bool bad = false;
  __syncthreads();  // s_rows

  if (s_rows.n == 1) {
    // One sequence: stage its K/V tile by tile, every warp reads them from shared memory.
    // Positions lowest .. last: from the earliest window start of the tile's tokens (tiles
    // still start at multiples of kv_rows, so position j0 + jj is state jj % 4).
    const int32_t last = s_rows.max_pos[0];
    const int64_t lowest = attention_window_start(s_rows.min_pos[0], a.window);
    const int32_t* blocks = a.block_table + static_cast<int64_t>(s_rows.row[0]) * a.max_blocks;
    const int n_elems = plan.kv_rows * head_dim;
    for (int64_t j0 = lowest - lowest % plan.kv_rows; j0 <= last; j0 += plan.kv_rows) {
      __syncthreads();  // every warp is done with the previous tile
      for (int jj = threadIdx.x; jj < plan.kv_rows; jj += blockDim.x) {
        const int64_t j = j0 + jj;
        s_slot[jj] =
            j >= lowest && j <= last ? attention_slot(blocks, a.block_size, a.n_slots, j) : -1;
      }
      __syncthreads();
      for (int e = threadIdx.x; e < n_elems; e += blockDim.x) {
        const int64_t slot = s_slot[e / head_dim];
        if (slot < 0) continue;
        s_k[e] = rk.at(rk.head(slot, pair.kv_head), e % head_dim);
        s_v[e] = rv.at(rv.head(slot, pair.kv_head), e % head_dim);
      }
      __syncthreads();
      if (!pair.active || !ok) continue;
      const int n_here = tile_positions(j0, plan.kv_rows, pos);
      const int lo = tile_first_index(j0, first);
      for (int jj = lo - lo % kPrefillResidues; jj < n_here; jj += kPrefillResidues) {
#pragma unroll
        for (int w = 0; w < kPrefillResidues; ++w) {
          const int at = jj + w;  // position j0 + at, state (j0 + at) % 4 == w
          if (at < lo) continue;
          if (at >= n_here) break;
          if (s_slot[at] < 0) {
            bad = true;
            continue;
          }
          attend(StagedRead{}, s_k + at * head_dim, StagedRead{}, s_v + at * head_dim, qr,
                 a.scale, a.softcap, lane, head_dim, m[w], l[w], acc[w]);
        }
      }
    }
  } else if (pair.active && ok) {
    // Tokens of several sequences (a decode batch, a chunk boundary): each warp on its own,
    // K/V from global memory, the same states and order. No block-wide sync on this path.
    const int32_t* blocks = a.block_table + static_cast<int64_t>(row) * a.max_blocks;
    for (int64_t j0 = first - first % kPrefillResidues; j0 <= pos; j0 += kPrefillResidues) {
#pragma unroll
      for (int w = 0; w < kPrefillResidues; ++w) {
        const int64_t j = j0 + w;
        if (j < first) continue;
        if (j > pos) break;
        const int64_t slot = attention_slot(blocks, a.block_size, a.n_slots, j);
        if (slot < 0) {
          bad = true;
          continue;
        }
        attend(rk, rk.head(slot, pair.kv_head), rv, rv.head(slot, pair.kv_head), qr, a.scale,
               a.softcap, lane, head_dim, m[w], l[w], acc[w]);
      }
    }
  }
  if (bad && lane == 0) atomicCAS(error_flag, 0, kDeviceErrorAttentionIndex);
  if (!pair.active || !ok) return;
  // Merge the 4 states in order, as attention_paged.cu merges its 4 warps.
  float big_m = 0.0f, factor[kPrefillResidues];
  const float total = merge_softmax(m, l, kPrefillResidues, big_m, factor);
  const float inv = 1.0f / add_sink(total, big_m, a.sinks, pair.head);
  float* oh = out + (pair.token * a.n_heads + pair.head) * a.head_dim;
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    const int i = lane + k * kWarpSize;
    if (i >= head_dim) continue;
    float sum = 0.0f;
    for (int w = 0; w < kPrefillResidues; ++w) sum = fmaf(acc[w][k], factor[w], sum);
    oh[i] = sum * inv;
  }
}

template <class RK, class RV>
void launch(const float* q, const RK& rk, const RV& rv, const PagedAttentionArgs& a, float* out,
            int* error_flag, cudaStream_t stream) {
  if (a.n_tokens <= 0 || a.n_heads <= 0) return;
  const PrefillPlan plan = plan_prefill(a.n_heads, a.n_kv_heads, a.head_dim);
  const int64_t tiles = (a.n_tokens + plan.tokens_per_block - 1) / plan.tokens_per_block;
  const dim3 grid(static_cast<unsigned>(tiles),
                  static_cast<unsigned>(a.n_kv_heads * plan.head_chunks));
  attention_prefill_kernel<RK, RV>
      <<<grid, static_cast<unsigned>(plan.warps * kWarpSize), 0, stream>>>(q, rk, rv, a, plan, out,
                                                                           error_flag);
}

// K and V pools of one kind (typed pointers or KvPoolView) through their readers.
template <class Pool>
void launch_pools(const float* q, Pool k_pool, Pool v_pool, const PagedAttentionArgs& a, float* out,
                  int* error_flag, cudaStream_t stream) {
  const int64_t kv_dim = a.n_kv_heads * a.head_dim;
  launch(q, kv_reader(k_pool, kv_dim, a.head_dim), kv_reader(v_pool, kv_dim, a.head_dim), a, out,
         error_flag, stream);
}

}  // namespace

void launch_attention_prefill_f32(const float* q, const float* k_pool, const float* v_pool,
                                  const PagedAttentionArgs& args, float* out, int* error_flag,
                                  cudaStream_t stream) {
  launch_pools(q, k_pool, v_pool, args, out, error_flag, stream);
}

void launch_attention_prefill_f16(const float* q, const uint16_t* k_pool, const uint16_t* v_pool,
                                  const PagedAttentionArgs& args, float* out, int* error_flag,
                                  cudaStream_t stream) {
  launch_pools(q, k_pool, v_pool, args, out, error_flag, stream);
}

void launch_attention_prefill_any(const float* q, KvPoolView k_pool, KvPoolView v_pool,
                                  const PagedAttentionArgs& args, float* out, int* error_flag,
                                  cudaStream_t stream) {
  launch_pools(q, k_pool, v_pool, args, out, error_flag, stream);
}

}  // namespace llmctl::cuda
