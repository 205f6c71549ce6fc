#pragma once
// Launchers for the kernels in kernels/*.cu: the only entry points host code may call.
// Plain C++ types and cudaStream_t only, so any host .cpp can include this header.
//
// Launchers trust their arguments (shapes, alignment, device pointers): the checks live once
// in the host-side wrappers in src/backend/cuda/, which also check the launch with
// LLMCTL_CUDA_CHECK_LAUNCH(). Launchers are asynchronous on `stream` and never synchronize.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace llmctl::cuda {

// ---------------------------------------------------------------------------
// get_rows (kernels/dequantize_rows.cu): embedding lookup with dequantization
// ---------------------------------------------------------------------------
// table (n_rows, row_len) in the named format, rows contiguous in ggml layout; ids (n_ids,)
// int32 on the device; out (n_ids, row_len) fp32: out[i, :] = dequantize(table[ids[i], :]).
// An id outside [0, n_rows) writes a NaN row and reads nothing (the wrapper rejects such ids
// before launch; this is the last line of defence). n_ids == 0 launches nothing.
// Requires 1 <= n_ids <= 2^31 - 1. Block formats also require row_len % 32 == 0 and `out`
// 16-byte aligned (they store float4).

void launch_get_rows_f32_f32(const float* table, int64_t n_rows, int64_t row_len,
                             const int32_t* ids, int64_t n_ids, float* out, cudaStream_t stream);
void launch_get_rows_f16_f32(const uint16_t* table, int64_t n_rows, int64_t row_len,
                             const int32_t* ids, int64_t n_ids, float* out, cudaStream_t stream);
void launch_get_rows_bf16_f32(const uint16_t* table, int64_t n_rows, int64_t row_len,
                              const int32_t* ids, int64_t n_ids, float* out, cudaStream_t stream);
void launch_get_rows_q8_0_f32(const void* table, int64_t n_rows, int64_t row_len,
                              const int32_t* ids, int64_t n_ids, float* out, cudaStream_t stream);
void launch_get_rows_q4_0_f32(const void* table, int64_t n_rows, int64_t row_len,
                              const int32_t* ids, int64_t n_ids, float* out, cudaStream_t stream);
void launch_get_rows_q4_1_f32(const void* table, int64_t n_rows, int64_t row_len,
                              const int32_t* ids, int64_t n_ids, float* out, cudaStream_t stream);
void launch_get_rows_mxfp4_f32(const void* table, int64_t n_rows, int64_t row_len,
                               const int32_t* ids, int64_t n_ids, float* out,
                               cudaStream_t stream);

// ---------------------------------------------------------------------------
// Device error flag
// ---------------------------------------------------------------------------
// Kernels that index with device-resident ids (positions, slots, block tables, rows) cannot
// throw; on a bad index they skip the item (or write NaN, as said per launcher) and set
// *error_flag (an int in device memory, 0 = no error) to one of these codes if it is still 0.
// The backend reads and clears the flag at its next sync and throws llmctl::Error then.
enum DeviceError : int {
  kDeviceErrorNone = 0,
  kDeviceErrorRopePosition = 1,    // rope: a negative position
  kDeviceErrorKvSlot = 2,          // kv_store: a slot outside the pool
  kDeviceErrorAttentionIndex = 3,  // attention: sequence row, position or block out of range
  kDeviceErrorCopyRow = 4,         // copy_rows: a row outside x
  kDeviceErrorMoeSlot = 5,         // moe_gather / moe_scatter: a slot outside its rows
};

// ---------------------------------------------------------------------------
// Element-wise and per-row ops (all f32, device pointers, row-major; n_tokens >= 0)
// ---------------------------------------------------------------------------
// out (n_tokens, n) = x / sqrt(mean(x^2) + eps) * w per row; w (n,). Sum of squares in double.
void launch_rmsnorm_f32(const float* x, const float* w, float eps, int64_t n_tokens, int64_t n,
                        float* out, cudaStream_t stream);
// x (n_tokens, n) += b (n,) per row.
void launch_add_bias_f32(float* x, const float* b, int64_t n_tokens, int64_t n,
                         cudaStream_t stream);
// x[i] += y[i], i < n.
void launch_add_f32(float* x, const float* y, int64_t n, cudaStream_t stream);
// out[i] = gate[i] / (1 + exp(-gate[i])) * up[i], i < n.
void launch_silu_mul_f32(const float* gate, const float* up, int64_t n, float* out,
                         cudaStream_t stream);
// out[i] = gelu_tanh(gate[i]) * up[i], i < n; gelu_tanh(g) = 0.5 g (1 + tanh(sqrt(2/pi)
// (g + 0.044715 g^3))) (kernels/gelu_mul.cu).
void launch_gelu_mul_f32(const float* gate, const float* up, int64_t n, float* out,
                         cudaStream_t stream);
// out[i] = swiglu_oai(gate[i], up[i]), i < n: min(g, 7) sigmoid(1.702 min(g, 7))
// (clamp(u, -7, 7) + 1) (kernels/swiglu_oai.cu; gpt-oss). out may alias gate or up.
void launch_swiglu_oai_f32(const float* gate, const float* up, int64_t n, float* out,
                           cudaStream_t stream);
// x[i] = cap * tanh(x[i] / cap), i < n, in place; cap > 0 (kernels/softcap.cu).
void launch_softcap_f32(float* x, int64_t n, float cap, cudaStream_t stream);
// x[i] = x[i] * factor, i < n, in place (kernels/scale.cu).
void launch_scale_f32(float* x, int64_t n, float factor, cudaStream_t stream);
// x (n_tokens, n_cols) row t *= attn_temperature_hd(positions[t], beta, length), in place;
// length >= 1 (kernels/attn_temperature.cu).
void launch_attn_temperature_f32(float* x, const int32_t* positions, int64_t n_tokens,
                                 int64_t n_cols, double beta, int64_t length, cudaStream_t stream);
// out (n_rows, row_len) row i = x row rows[i]; x holds x_rows rows. A row outside [0, x_rows)
// gives a NaN row and kDeviceErrorCopyRow.
void launch_copy_rows_f32(const float* x, int64_t x_rows, int64_t row_len, const int32_t* rows,
                          int64_t n_rows, float* out, int* error_flag, cudaStream_t stream);

// ---------------------------------------------------------------------------
// Mixture of experts (kernels/moe_*.cu, sigmoid_scale_rows.cu; backend.h "mixture of experts")
// ---------------------------------------------------------------------------
// Per token t < n_tokens of logits (n_tokens, n_expert): ids (n_tokens, k) i32, the experts of
// the k largest softmax probabilities, descending (equal: lower expert first; NaN last), and
// weights (n_tokens, k) f32 their probabilities, divided by max(their sum, 6.103515625e-5)
// when `normalize`. The softmax is core/softmax.h's, so weights are within an ulp or two of
// the CPU's (expf). 1 <= k <= n_expert < 2^31.
void launch_moe_route_f32(const float* logits, int64_t n_tokens, int64_t n_expert, int64_t k,
                          bool normalize, int32_t* ids, float* weights, cudaStream_t stream);
// out (m, n_cols) row i = x row (slots[i] / k); x holds x_rows rows. A negative slot or one
// naming a row outside x gives a NaN row and kDeviceErrorMoeSlot.
void launch_moe_gather_f32(const float* x, int64_t x_rows, int64_t n_cols, const int32_t* slots,
                           int64_t m, int64_t k, float* out, int* error_flag,
                           cudaStream_t stream);
// y_slots row slots[i] = y row i, i < m; y_slots holds n_slots rows. A slot outside
// [0, n_slots) stores nothing and gives kDeviceErrorMoeSlot.
void launch_moe_scatter_f32(const float* y, int64_t n_cols, const int32_t* slots, int64_t m,
                            int64_t n_slots, float* y_slots, int* error_flag,
                            cudaStream_t stream);
// out (n_tokens, n_cols) row t = sum_{r < k} weights[t, r] * y_slots[t * k + r], products
// rounded to f32 and added in rank order (no FMA): the CPU reference's bits.
void launch_moe_combine_f32(const float* y_slots, const float* weights, int64_t n_tokens,
                            int64_t k, int64_t n_cols, float* out, cudaStream_t stream);
// x (n_tokens, n_cols) row t *= 1 / (1 + exp(-gate[t])), in place.
void launch_sigmoid_scale_rows_f32(float* x, const float* gate, int64_t n_tokens, int64_t n_cols,
                                   cudaStream_t stream);

// ---------------------------------------------------------------------------
// rope (kernels/rope.cu, math in kernels/rope_math.cuh)
// ---------------------------------------------------------------------------
// x (n_tokens, n_heads, head_dim) rotated in place: token t's pairs i < n_rot / 2 at position
// positions[t] (Normal pairs (2i, 2i+1), neox pairs (i, i + n_rot/2)); theta in double, divided
// by freq_factors[i] when freq_factors (n_rot / 2,) is not null, YaRN-mixed when
// yarn.ext_factor != 0, cos and sin times yarn.mscale. A negative position leaves the token
// unrotated and gives kDeviceErrorRopePosition. n_rot even, <= head_dim.
struct RopeYarnArgs {
  double ext_factor = 0.0;  // 0: no YaRN
  double low = 0.0;         // correction pairs of the ramp
  double high = 0.0;
  double mscale = 1.0;
};
void launch_rope_f32(float* x, const int32_t* positions, int64_t n_tokens, int64_t n_heads,
                     int64_t head_dim, int64_t n_rot, bool neox, double freq_base,
                     double freq_scale, const float* freq_factors, RopeYarnArgs yarn,
                     int* error_flag, cudaStream_t stream);

// ---------------------------------------------------------------------------
// Paged KV cache (kernels/kv_store.cu, kernels/attention_paged.cu)
// ---------------------------------------------------------------------------
// k_pool[slots[t]] = k[t], v_pool[slots[t]] = v[t] for t < n_tokens: rows of kv_dim, pools of
// n_slots rows (f32, or f16 rounded to nearest even). A slot outside [0, n_slots) stores nothing
// and gives kDeviceErrorKvSlot.
void launch_kv_store_f32_f32(const float* k, const float* v, const int32_t* slots, int64_t n_tokens,
                             int64_t kv_dim, int64_t n_slots, float* k_pool, float* v_pool,
                             int* error_flag, cudaStream_t stream);
void launch_kv_store_f32_f16(const float* k, const float* v, const int32_t* slots, int64_t n_tokens,
                             int64_t kv_dim, int64_t n_slots, uint16_t* k_pool, uint16_t* v_pool,
                             int* error_flag, cudaStream_t stream);

// A K or V pool of any type (backend.h BufferType F32, F16, Q8_0, Q4_0: llama.cpp's -ctk/-ctv,
// K and V each its own): Q8_0 / Q4_0 rows are kv_dim / 32 ggml blocks (kv_pool.cuh), and a
// head_dim of a multiple of 32 puts every head on whole blocks.
enum class KvPoolType : int { F32 = 0, F16 = 1, Q8_0 = 2, Q4_0 = 3 };
struct KvPoolView {
  const void* data = nullptr;
  KvPoolType type = KvPoolType::F32;
};
struct KvPoolOut {
  void* data = nullptr;
  KvPoolType type = KvPoolType::F32;
};
// launch_kv_store_* into pools of any types: f32 copied, f16 rounded to nearest even, Q8_0 /
// Q4_0 by ggml's reference quantizer per 32 values (quantize_kv_row's bytes; kv_dim % 32 == 0).
void launch_kv_store_any(const float* k, const float* v, const int32_t* slots, int64_t n_tokens,
                         int64_t kv_dim, int64_t n_slots, KvPoolOut k_pool, KvPoolOut v_pool,
                         int* error_flag, cudaStream_t stream);

// Largest head_dim the attention kernel holds in registers (8 elements per lane).
constexpr int64_t kAttentionMaxHeadDim = 256;

// The paged layout attention reads (backend.h PagedKv), device pointers for the I32 tables.
struct PagedAttentionArgs {
  int64_t n_tokens = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0;  // head_dim <= 256
  int64_t n_slots = 0;  // pool rows (n_blocks * block_size), each n_kv_heads * head_dim
  int64_t block_size = 0;
  const int32_t* block_table = nullptr;  // (n_seq_rows, max_blocks)
  int64_t n_seq_rows = 0, max_blocks = 0;
  const int32_t* token_seq = nullptr;  // (n_tokens,)
  const int32_t* positions = nullptr;  // (n_tokens,)
  float scale = 1.0f;                  // backend.h attention_scale(): 1 / sqrt(head_dim) default
  float softcap = 0.0f;                // > 0: scores s -> softcap * tanh(s / softcap); 0: none
  int32_t window = 0;                  // > 0: a query at p sees positions p - window + 1 .. p
  const float* sinks = nullptr;        // (n_heads,) sink logits in each softmax's denominator
};
// out (n_tokens, n_heads, head_dim): causal softmax(q K^T * scale) V of each token over its
// sequence's positions j0 .. positions[t], j0 = attention_window_start(p, window) (0 without a
// window; positions before it are not read), each score soft-capped when softcap > 0, with
// sinks: head h's softmax denominator plus exp(sinks[h] - max) (attention_math.cuh
// add_sink) (GQA: kv
// head h / (n_heads / n_kv_heads)), online softmax in f32. Bad indices give a NaN head and
// kDeviceErrorAttentionIndex.
void launch_attention_paged_f32(const float* q, const float* k_pool, const float* v_pool,
                                const PagedAttentionArgs& args, float* out, int* error_flag,
                                cudaStream_t stream);
void launch_attention_paged_f16(const float* q, const uint16_t* k_pool, const uint16_t* v_pool,
                                const PagedAttentionArgs& args, float* out, int* error_flag,
                                cudaStream_t stream);
// The same over pools of any types (quantized, or K and V of different types): each element
// dequantized as dequant.h does, then the same arithmetic.
void launch_attention_paged_any(const float* q, KvPoolView k_pool, KvPoolView v_pool,
                                const PagedAttentionArgs& args, float* out, int* error_flag,
                                cudaStream_t stream);

// launch_attention_paged_* for prefill (kernels/attention_prefill.cu): the same contract and
// the same `out`, bit for bit, with K/V staged in shared memory per tile of the batch's tokens
// and one KV head group, so each K/V row is read once per tile instead of once per (token,
// head). Tiles whose tokens mix sequences (any token_seq/positions are allowed) read K/V per
// (token, head) from global memory instead, with the same result.
void launch_attention_prefill_f32(const float* q, const float* k_pool, const float* v_pool,
                                  const PagedAttentionArgs& args, float* out, int* error_flag,
                                  cudaStream_t stream);
void launch_attention_prefill_f16(const float* q, const uint16_t* k_pool, const uint16_t* v_pool,
                                  const PagedAttentionArgs& args, float* out, int* error_flag,
                                  cudaStream_t stream);
void launch_attention_prefill_any(const float* q, KvPoolView k_pool, KvPoolView v_pool,
                                  const PagedAttentionArgs& args, float* out, int* error_flag,
                                  cudaStream_t stream);

// The fields attention_paged_stats writes per (token, head), in backend.h AttnStat's order
// (cuda_backend.cpp static_asserts that the two agree): over the scores s[j0 .. p] the softmax
// receives (scaled, and capped when softcap > 0),
// max, min, sum, sum of squares (f64 sums) of the finite ones, NaN and Inf counts, the entropy
// of the softmax applied (nats; NaN when it is), p - j0 + 1; then over the scores before the
// cap (q . k * scale; the same scores without one): max and min of the finite ones and the
// count of NaN or +-Inf ones.
enum AttentionStatField : int {
  kAttnFieldMax = 0,
  kAttnFieldMin,
  kAttnFieldSum,
  kAttnFieldSumSq,
  kAttnFieldNan,
  kAttnFieldInf,
  kAttnFieldEntropy,
  kAttnFieldCount,
  kAttnFieldRawMax,
  kAttnFieldRawMin,
  kAttnFieldRawNonFinite,
  kAttnFieldsPerHead
};
// launch_attention_paged_* that also writes stats (n_tokens, n_heads, kAttnFieldsPerHead) f32;
// `out` is bit-identical to the plain launcher's (one kernel template, explicit fmaf). A bad
// index gives NaN stats too.
void launch_attention_paged_stats_f32(const float* q, const float* k_pool, const float* v_pool,
                                      const PagedAttentionArgs& args, float* out, float* stats,
                                      int* error_flag, cudaStream_t stream);
void launch_attention_paged_stats_f16(const float* q, const uint16_t* k_pool,
                                      const uint16_t* v_pool, const PagedAttentionArgs& args,
                                      float* out, float* stats, int* error_flag,
                                      cudaStream_t stream);
void launch_attention_paged_stats_any(const float* q, KvPoolView k_pool, KvPoolView v_pool,
                                      const PagedAttentionArgs& args, float* out, float* stats,
                                      int* error_flag, cudaStream_t stream);

// ---------------------------------------------------------------------------
// top_k (kernels/top_k.cu): sampling on the device
// ---------------------------------------------------------------------------
// Per row of logits (n_rows, n_cols) f32: ids (n_rows, k) i32 and values (n_rows, k) f32 of the
// k largest values in descending order; equal values (+0 and -0 are equal): lower index first;
// NaN ranks below every number. 1 <= k <= n_cols < 2^31. k = 1 is an argmax reduction; larger
// k a radix select of the k-th largest (value, index) key, then a bitonic sort of the k keys
// in shared memory, or for k > kTopKSharedKeys in `scratch` (top_k_scratch_bytes()).
constexpr int64_t kTopKSharedKeys = 2048;
// Bytes of device scratch launch_top_k_f32 needs for these sizes (0 when k <= kTopKSharedKeys).
size_t top_k_scratch_bytes(int64_t n_rows, int64_t k);
void launch_top_k_f32(const float* logits, int64_t n_rows, int64_t n_cols, int64_t k, void* scratch,
                      int32_t* ids, float* values, cudaStream_t stream);

// ---------------------------------------------------------------------------
// find_nan_inf (kernels/find_nan_inf.cu): the sampler's check of a logits row on the device
// ---------------------------------------------------------------------------
// Per row of logits (n_rows, n_cols) f32, n_cols < 2^31: out (n_rows, 2) i32 = the lowest
// column holding NaN, then the lowest holding +inf; -1 where there is none.
void launch_find_nan_inf_f32(const float* logits, int64_t n_rows, int64_t n_cols, int32_t* out,
                             cudaStream_t stream);

// ---------------------------------------------------------------------------
// matmul (kernels/matvec_<dtype>.cu, template in kernels/matvec.cuh)
// ---------------------------------------------------------------------------
// out (n_tokens, d) = x (n_tokens, n) @ W^T, W (d, n) in ggml layout of the named dtype (block
// types: n % 32 == 0). One warp per output row, f32 accumulation; each token's result is
// bit-identical whatever n_tokens is (batch invariance). x and out must not alias.
void launch_matvec_f32_f32(const void* w, int64_t d, int64_t n, const float* x, int64_t n_tokens,
                           float* out, cudaStream_t stream);
void launch_matvec_f16_f32(const void* w, int64_t d, int64_t n, const float* x, int64_t n_tokens,
                           float* out, cudaStream_t stream);
void launch_matvec_bf16_f32(const void* w, int64_t d, int64_t n, const float* x, int64_t n_tokens,
                            float* out, cudaStream_t stream);
void launch_matvec_q8_0_f32(const void* w, int64_t d, int64_t n, const float* x, int64_t n_tokens,
                            float* out, cudaStream_t stream);
void launch_matvec_q4_0_f32(const void* w, int64_t d, int64_t n, const float* x, int64_t n_tokens,
                            float* out, cudaStream_t stream);
void launch_matvec_q4_1_f32(const void* w, int64_t d, int64_t n, const float* x, int64_t n_tokens,
                            float* out, cudaStream_t stream);
void launch_matvec_mxfp4_f32(const void* w, int64_t d, int64_t n, const float* x,
                             int64_t n_tokens, float* out, cudaStream_t stream);

// ---------------------------------------------------------------------------
// cuBLAS prefill inputs (kernels/dequantize_f16.cu, kernels/convert_f16.cu)
// ---------------------------------------------------------------------------
// out (n_rows, n) f16 bits = dequantize(w) rounded to nearest even; w holds n_rows contiguous
// rows of n elements of the named dtype (block types: n % 32 == 0).
void launch_dequantize_f16_f32(const void* w, int64_t n_rows, int64_t n, uint16_t* out,
                               cudaStream_t stream);
void launch_dequantize_f16_bf16(const void* w, int64_t n_rows, int64_t n, uint16_t* out,
                                cudaStream_t stream);
void launch_dequantize_f16_q8_0(const void* w, int64_t n_rows, int64_t n, uint16_t* out,
                                cudaStream_t stream);
void launch_dequantize_f16_q4_0(const void* w, int64_t n_rows, int64_t n, uint16_t* out,
                                cudaStream_t stream);
void launch_dequantize_f16_q4_1(const void* w, int64_t n_rows, int64_t n, uint16_t* out,
                                cudaStream_t stream);
void launch_dequantize_f16_mxfp4(const void* w, int64_t n_rows, int64_t n, uint16_t* out,
                                 cudaStream_t stream);
// out[i] = x[i] rounded to f16 (nearest even), i < n.
void launch_convert_f32_f16(const float* x, int64_t n, uint16_t* out, cudaStream_t stream);

}  // namespace llmctl::cuda
