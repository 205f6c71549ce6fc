#pragma once
// The seam between the engine and the hardware (ARCHITECTURE.md "The backend seam").
//
// The forward pass (src/model/forward.cpp) is written once against Backend&; each backend
// (cpu/, cuda/) implements the protected *_impl methods. The public methods are
// non-virtual: they check shapes and dtypes once, here (backend.cpp), then call the
// implementation, so no backend repeats or forgets a check.
//
// Conventions
//   * Activations are f32 arrays in a Buffer allocated by the backend (host memory on CPU,
//     device memory on CUDA). Shapes are given row-major, last index contiguous: q (n_heads,
//     head_dim) is n_heads rows of head_dim floats.
//   * Weights are WeightViews: a 2-D (or 1-D) tensor in ggml layout and dtype, never copied
//     to f32 on load. W (n_rows, n_cols) has rows of n_cols elements (ggml shape
//     [n_cols, n_rows]; n_cols is shape[0]). bind_weight() turns a host view (pointer into
//     the mapped GGUF file) into one the backend can read: the identity on CPU, an upload on
//     a device backend.
//   * Every op works on a batch of n_tokens rows (one token, a prefill chunk, or tokens of
//     several sequences decoded together); the KV cache is paged (PagedKv below).
//   * All calls may be asynchronous on a device backend; download() and sync() wait. A bad
//     index that only a kernel can see (an id outside the embedding table) is then reported
//     as an Error by the next download() or sync(), not by the op that met it.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backend/buffer.h"  // Buffer, BufferType
#include "core/ggml_type.h"
#include "core/rope_math.h"

namespace llmctl {

// ---------------------------------------------------------------------------
// WeightView: a weight tensor in place (no copy), ggml layout
// ---------------------------------------------------------------------------
struct WeightView {
  std::string name;               // GGUF tensor name, for error messages
  GgmlType type = GgmlType::F32;  // an engine type (matmul, get_rows): supports_weight_type()
  int64_t n_cols = 0;             // row length: ggml shape[0]
  int64_t n_rows = 1;             // ggml shape[1]; 1 for a vector
  const void* data = nullptr;     // host (mapping) or device address; see bind_weight()
  // First row of this view within the tensor `name`: 0 but for the row views of a fused
  // tensor past its first part (model/arch.h split_fused_layer: K and V of a fused QKV, up of
  // a fused gate/up), which read the same input as the first part.
  int64_t row0 = 0;

  bool present() const { return data != nullptr; }
};

// Bytes of one row of n_cols elements of `type` (n_cols a multiple of the block size).
size_t weight_row_bytes(GgmlType type, int64_t n_cols);

struct RopeParams {
  RopeType type = RopeType::Normal;
  int64_t head_dim = 0;
  int64_t n_rot = 0;  // rotated dims per head (<= head_dim, even)
  double freq_base = 10000.0;
  double freq_scale = 1.0;  // 1 / linear scaling factor
  // Optional (n_rot / 2,) F32 per-pair frequency divisors (Llama 3.1 scaling, see
  // ModelWeights::rope_freqs), bound to the backend; absent: all 1.
  WeightView freq_factors;
  // YaRN (core/rope_math.h rope_angle): ext_factor 0 is off; else pairs below yarn_low
  // extrapolate, pairs above yarn_high interpolate by freq_scale, a linear ramp between.
  double ext_factor = 0.0;
  double yarn_low = 0.0;
  double yarn_high = 0.0;
  // cos and sin are multiplied by this (YaRN's attention factor); 1 leaves them exact.
  double mscale = 1.0;

  // Whether o gives the same angles (cos, sin) at every position: every field above but the
  // pairing (type) and head_dim; of freq_factors only whether they are given (a cache compares
  // their values too).
  // A new field that changes the angles must be compared here (cpu/rope_table.h caches by it).
  bool same_angles(const RopeParams& o) const {
    return n_rot == o.n_rot && freq_base == o.freq_base && freq_scale == o.freq_scale &&
           freq_factors.present() == o.freq_factors.present() && ext_factor == o.ext_factor &&
           yarn_low == o.yarn_low && yarn_high == o.yarn_high && mscale == o.mscale;
  }
};

// The shape of one attention call and the per-layer options of its scores (attention() below).
// The options default to plain causal attention (scale 1/sqrt(head_dim), no cap, no window):
// with all three 0 every backend computes exactly what it computed before they existed.
struct AttentionShape {
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;  // divides n_heads (GQA: n_heads / n_kv_heads query heads per kv head)
  int64_t head_dim = 0;
  // Score scale: s = q . k * scale. 0 means 1 / sqrt(head_dim) rounded to float
  // (attention_scale()); else finite and > 0 (Gemma 2/3: 1 / sqrt(query_pre_attn_scalar)).
  float scale = 0.0f;
  // Score soft-cap (Gemma 2: 50): 0 = none; else finite and > 0, and every scaled score becomes
  // softcap * tanh(s / softcap) before the softmax (core/activation_math.h softcap_score).
  float softcap = 0.0f;
  // Sliding window (Gemma 2: 4096 on alternate layers, Gemma 3: 512 on 5 of 6): 0 = none; else
  // >= 1, and a query at position p sees only key positions j with p - j < window, i.e.
  // j = max(0, p - window + 1) .. p (llama.cpp masks p - j >= n_swa, LLAMA_SWA_TYPE_STANDARD).
  // Positions before the window are not read at all, so their cache blocks may be released.
  int32_t window = 0;
  // Attention sinks (gpt-oss): absent = none; else F32 (n_heads,), bound to the backend, and
  // head h's softmax takes sink logit sinks[h] into its denominator (core/softmax.h
  // softmax_sink_inplace): a[j] = exp(s[j] - m) / (sum_i exp(s[i] - m) + exp(sinks[h] - m)),
  // m = max(max_i s[i], sinks[h]), so a head may attend to nothing. The statistics describe
  // the scores without it (Entropy: of the a[j] the kernel applied, which sum to < 1).
  WeightView sinks = {};
};

// The scale attention() multiplies q . k by: s.scale, or 1 / sqrt(head_dim) rounded to float.
float attention_scale(const AttentionShape& s);
// The first key position a query at position `pos` sees: 0, or pos - window + 1 with a window.
inline int64_t attention_first_position(int64_t pos, int32_t window) {
  return window > 0 && pos >= window ? pos - window + 1 : 0;
}

// The paged KV cache as attention reads it (model/kv_cache.h owns the bookkeeping).
//   k_pool, v_pool  (n_blocks * block_size, kv_dim)  F32, F16, Q8_0 or Q4_0 rows ("slots"),
//                   each of its own type (llama.cpp's -ctk/-ctv), of the same size; a block
//                   type's row is kv_dim / 32 blocks, so head g's values are blocks
//                   g * head_dim / 32 .. of its row (head_dim a multiple of 32)
//   block_table     I32 (n_seq_rows, max_blocks): the pool blocks of each sequence in the
//                   batch, in position order (position j lives in slot
//                   block_table[row][j / block_size] * block_size + j % block_size)
//   token_seq       I32 (n_tokens): the block_table row of each query token
//   positions       I32 (n_tokens): each query token's position p; it attends to its
//                   sequence's positions 0 .. p (its own K/V stored before the call)
struct PagedKv {
  const Buffer* k_pool = nullptr;
  const Buffer* v_pool = nullptr;
  int64_t block_size = 0;
  const Buffer* block_table = nullptr;
  int64_t max_blocks = 0;  // columns of block_table
  const Buffer* token_seq = nullptr;
  const Buffer* positions = nullptr;
};

// Weight dtypes the engine can load (every backend's supports_weight_type() is a subset).
bool backend_supports_weight_type(GgmlType type);

// Per (token, head) statistics of one attention call, written by attention_with_stats() as
// kAttnStatFields floats per (token, head). Over the scaled scores s[0 .. p] of that query:
//   Max, Min, Sum, SumSq  over the finite scores only (Max -inf, Min +inf, sums 0 if none)
//   Nan, Inf              how many scores were NaN, resp. +-Inf
//   Entropy               -sum_j a_j ln a_j of the softmax a the kernel applied, in nats
//                         (NaN when the softmax is)
//   Count                 p + 1, the number of scores (with a window: the positions the
//                         window leaves, p - attention_first_position(p) + 1)
//   RawMax, RawMin        over the finite scores before the soft-cap (q . k * scale); equal to
//                         Max, Min without AttentionShape::softcap
//   RawNonFinite          how many scores were NaN or +-Inf before the soft-cap (a cap turns an
//                         overflowed +-Inf into a finite +-softcap, so only this field shows it)
// Max .. Count describe the scores the softmax receives: with a soft-cap, after the cap; only
// over the positions inside the window. Reduced where the scores are (on the device for CUDA);
// the engine downloads only these.
enum AttnStat : int {
  kAttnStatMax = 0,
  kAttnStatMin,
  kAttnStatSum,
  kAttnStatSumSq,
  kAttnStatNan,
  kAttnStatInf,
  kAttnStatEntropy,
  kAttnStatCount,
  kAttnStatRawMax,
  kAttnStatRawMin,
  kAttnStatRawNonFinite,
  kAttnStatFields
};

// What gram_eigen() returns (Backend below).
struct GramEigen {
  std::vector<double> lambda;   // (dim,) eigenvalues of G, ascending
  std::vector<double> vectors;  // want_vectors: (dim, dim) column-major, column i for lambda[i]
  const char* gram_precision = "f64";  // the products G came from: "f64" or "f32"
  bool fell_back = false;              // gram_eigen_checked: float32 tried, float64 needed
  double gram_error_norm = 0;  // the model of ||G - exact G||_2 for those products (absolute)
  double seconds_gram = 0;     // forming G (both passes when it fell back; transfers included)
  double seconds_check = 0;    // gram_eigen_checked: measuring the float32 Gram's error
  double seconds_eigen = 0;    // the eigensolver (both solves when it fell back)
};

// ---------------------------------------------------------------------------
// Backend
// ---------------------------------------------------------------------------
class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  // Threads the backend computes with (CPU), or 1.
  virtual int n_threads() const { return 1; }
  // Whether matmul and get_rows have kernels for weights of `type` (bind_weight() refuses
  // the others with an error naming the tensor).
  virtual bool supports_weight_type(GgmlType type) const {
    return backend_supports_weight_type(type);
  }

  // -- memory ---------------------------------------------------------------
  // A zero-filled buffer of n >= 1 elements of `type`.
  Buffer alloc(int64_t n, BufferType type = BufferType::F32);
  // dst[offset .. offset + n) = src[0 .. n)   (src in host memory; dst F32, resp. I32)
  void upload(Buffer& dst, const float* src, int64_t n, int64_t offset = 0);
  void upload(Buffer& dst, const int32_t* src, int64_t n, int64_t offset = 0);
  // dst[0 .. n) = src[offset .. offset + n)   (F32, resp. I32; dst in host memory); waits for
  // pending work.
  void download(const Buffer& src, float* dst, int64_t n, int64_t offset = 0);
  void download(const Buffer& src, int32_t* dst, int64_t n, int64_t offset = 0);
  // A view of the same weight the backend can read (CPU: the same view).
  WeightView bind_weight(const WeightView& host);
  // Does now the work a bound weight's first matmul would do first (the fast CPU backend: its
  // repacked or huge-page copy), so that a timed run does not pay it. Default: nothing to do.
  virtual void prepare_matmul(const WeightView& /*bound*/) {}
  // Bytes of the weight copies that preparation (or first matmuls) made so far, beside the
  // bound weights themselves (the fast CPU backend: repacked and huge-page copies). Default: 0.
  virtual uint64_t prepared_weight_bytes() const { return 0; }
  void sync() { sync_impl(); }

  // -- ops on a batch of n_tokens rows ------------------------------------------
  // Activation buffers are F32, row-major, and may be larger than the batch (they are
  // allocated for the largest batch); ops read and write rows 0 .. n_tokens - 1 only.
  // Batch invariance: every backend computes each output row with arithmetic that does not
  // depend on n_tokens, on the row's place in the batch or on the thread count, so a token
  // gets bit-identical results alone or batched (the scheduler and prefix sharing rely on it).
  // One opt-in exception: a CUDA backend made with BackendChoice::batch_invariant = false
  // sends matmuls of at least 16 (F16 weights) or 64 (other dtypes) tokens through cuBLAS
  // with f16 inputs and f32 accumulation; its results then depend on the batch size and
  // differ from the matvec's by about 2^-11 * sum|w*x|. The default keeps the contract.

  // Embedding lookup: out (n_tokens, n_cols) row t = dequantize(table[ids[t], :]).
  // ids I32 (>= n_tokens); an id outside the table's rows is an error.
  void get_rows(const WeightView& table, const Buffer& ids, int64_t n_tokens, Buffer& out);
  // out (n_tokens, n) = x / sqrt(mean(x^2) + eps) * w   per row;  w F32 (n,)
  void rmsnorm(const Buffer& x, const WeightView& w, float eps, int64_t n_tokens, Buffer& out);
  // out (n_tokens, d) = x (n_tokens, n) @ W^T    W (d, n) any supported dtype
  void matmul(const WeightView& w, const Buffer& x, int64_t n_tokens, Buffer& out);
  // The matmuls of one input (attention's q, k and v; the feed-forward's gate and up):
  // *outs[i] = x @ ws[i]^T for i < count (1 to kMaxSharedMatmuls weights of one row length;
  // the outputs distinct and apart from x). Each output is the one matmul gives, bit for bit;
  // a backend may run them as one op (the CPU fast backend: x converted once, one hand-off to
  // its threads). Default: one matmul after another.
  static constexpr int kMaxSharedMatmuls = 3;
  void matmul_shared(const WeightView* const* ws, Buffer* const* outs, int count, const Buffer& x,
                     int64_t n_tokens);
  // x (n_tokens, n) += b (n,) per row    b F32 (attention q/k/v biases)
  void add_bias(Buffer& x, const WeightView& b, int64_t n_tokens);
  // x (n_tokens, n_heads, head_dim): token t's heads rotated for position positions[t]
  // (rope_math.h).   positions I32 (>= n_tokens)
  void rope(Buffer& x, const Buffer& positions, int64_t n_tokens, int64_t n_heads,
            const RopeParams& p);
  // k_pool[slots[t]] = k[t], v_pool[slots[t]] = v[t] for t < n_tokens   (rows of kv_dim;
  // converted to each pool's type: F32, F16 rounded to nearest even, Q8_0 / Q4_0 by ggml's
  // reference round-to-nearest quantizer, quant/quantize.h, per 32 values; kv_dim a multiple
  // of 32 for those).   k, v F32 (n_tokens, kv_dim); slots I32
  void kv_store(const Buffer& k, const Buffer& v, const Buffer& slots, int64_t n_tokens,
                int64_t kv_dim, Buffer& k_pool, Buffer& v_pool);
  // Causal attention of each query token over its sequence's cached positions (PagedKv):
  //   q (n_tokens, n_heads, head_dim); for token t at position p, head h, kv head
  //   g = h / (n_heads / n_kv_heads), j0 = attention_first_position(p, s.window):
  //     s[j] = q[t, h] . K[j, g] * attention_scale(s),  j = j0 .. p
  //     s[j] = softcap_score(s[j], s.softcap)           (when s.softcap > 0)
  //     a = softmax(s) (with s.sinks: that softmax's denominator gets exp(sinks[h]) too)
  //     out[t, h] = sum_j a[j] V[j, g]
  //   out (n_tokens, n_heads, head_dim)
  void attention(const Buffer& q, const PagedKv& kv, int64_t n_tokens, const AttentionShape& s,
                 Buffer& out);
  // attention() that also reduces statistics of the scores (AttnStat above): out is
  // bit-identical to attention()'s;  stats F32 (n_tokens, n_heads, kAttnStatFields).
  void attention_with_stats(const Buffer& q, const PagedKv& kv, int64_t n_tokens,
                            const AttentionShape& s, Buffer& out, Buffer& stats);
  // The k largest values of each row, for sampling on the device:
  //   logits (n_rows, n_cols) F32  ->  ids I32 (n_rows, k), values F32 (n_rows, k)
  // in descending order of value; equal values: the lower index first; NaN ranks below
  // every number (so a row's NaNs come last). 1 <= k <= n_cols. k = 1 is argmax.
  void top_k(const Buffer& logits, int64_t n_rows, int64_t n_cols, int64_t k, Buffer& ids,
             Buffer& values);
  // The sampler's step-0 check on the device (sampler.h), so that sampling from top_k's
  // candidates can refuse exactly the rows a sampler over the whole row refuses:
  //   logits (n_rows, n_cols) F32  ->  out I32 (n_rows, 2): per row the lowest column holding
  //   NaN, then the lowest holding +inf; -1 where there is none.
  void find_nan_inf(const Buffer& logits, int64_t n_rows, int64_t n_cols, Buffer& out);
  // out[i] = silu(gate[i]) * up[i], i < n,  silu(g) = g / (1 + exp(-g))     (SwiGLU)
  void silu_mul(const Buffer& gate, const Buffer& up, int64_t n, Buffer& out);
  // out[i] = gelu_tanh(gate[i]) * up[i], i < n     (GeGLU: Gemma's FFN)
  //   gelu_tanh(g) = 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3)))
  // llama.cpp's ggml_gelu_f32 (ggml-cpu/vec.h, ggml-cuda/unary.cuh), the tanh approximation
  // Hugging Face calls gelu_pytorch_tanh. llama.cpp's CPU backend reads it from a table of f16
  // inputs and outputs for |g| < 10 (GGML_GELU_FP16); llmctl computes it in f32 (no table).
  // out may alias gate or up.
  void gelu_mul(const Buffer& gate, const Buffer& up, int64_t n, Buffer& out);
  // out[i] = swiglu_oai(gate[i], up[i]), i < n (core/activation_math.h: gate clamped above at 7,
  // up to [-7, 7], gate * sigmoid(1.702 gate) * (up + 1); gpt-oss's experts, ggml's
  // swiglu_oai). out may alias gate or up.
  void swiglu_oai(const Buffer& gate, const Buffer& up, int64_t n, Buffer& out);
  // x[i] = softcap_score(x[i], cap) = cap * tanh(x[i] / cap), i < n, in place; cap finite > 0
  // (Gemma 2's final-logit soft-cap 30 over the logits rows).
  void softcap(Buffer& x, int64_t n, float cap);
  // x[i] = x[i] * factor, i < n, in place; factor finite (Gemma's embedding scale sqrt(n_embd),
  // llama.cpp's ggml_scale: one f32 multiply per element)
  void scale(Buffer& x, int64_t n, float factor);
  // x (n_tokens, n_cols) row t *= attn_temperature(positions[t], beta, length), in place: one
  // f32 multiply per element by the factor of core/rope_math.h (Mistral 3's scaling of q after
  // RoPE, llama.cpp's ggml_mul by inp_attn_scale).   positions I32 (>= n_tokens); beta finite,
  // length >= 1
  void attn_temperature(Buffer& x, const Buffer& positions, int64_t n_tokens, int64_t n_cols,
                        double beta, int64_t length);
  // x[i] += y[i], i < n     (residual)
  void add(Buffer& x, const Buffer& y, int64_t n);
  // out (n_rows, row_len) row i = x row rows[i]    (picks the rows that need logits)
  void copy_rows(const Buffer& x, int64_t row_len, const Buffer& rows, int64_t n_rows, Buffer& out);

  // -- mixture of experts (the routed FFN of model/forward.cpp) -----------------------------
  // A token's FFN output is the weighted sum of k of n_expert expert FFNs, chosen per token by
  // a router. The engine sorts the batch's n_tokens * k (token, rank) slots by expert on the
  // host (slot s = t * k + r is token t's rank-r expert), so that each expert's weights are read
  // once per step, however many tokens chose it:
  //   moe_route    router logits -> each token's k experts and their weights
  //   moe_gather   the input rows of one expert's slots, then matmuls with that expert's views
  //   moe_scatter  that expert's output rows back to their slots
  //   moe_combine  each token's k slot rows, weighted, added in rank order
  // Each output row depends only on its own token's rows, so batch invariance holds.
  //
  // Router: logits (n_tokens, n_expert) F32 -> ids I32 (n_tokens, k), weights F32 (n_tokens, k):
  //   p = softmax of the row (core/softmax.h softmax_inplace: max subtracted, sum in double);
  //   ids[t, 0 .. k) the experts of the k largest p, descending, equal p the lower expert first
  //   (a NaN logit ranks below every number); weights[t, r] = p[ids[t, r]], divided by
  //   max(sum_r p[ids[t, r]], 6.103515625e-5) when `normalize` (llama.cpp's build_moe_ffn
  //   norm_w: Mixtral, Qwen3-MoE; not Qwen2-MoE). 1 <= k <= n_expert. Backends may differ in
  //   the last bits of exp (CUDA's expf), so ids can differ only between near-equal experts.
  void moe_route(const Buffer& logits, int64_t n_tokens, int64_t n_expert, int64_t k,
                 bool normalize, Buffer& ids, Buffer& weights);
  // out (m, n_cols) row i = x row (slots[offset + i] / k): the tokens of one expert's slots.
  //   x (>= max slot / k + 1 rows, n_cols) F32; slots I32 (>= offset + m)
  void moe_gather(const Buffer& x, int64_t n_cols, const Buffer& slots, int64_t offset, int64_t m,
                  int64_t k, Buffer& out);
  // y_slots row slots[offset + i] = y row i, i < m:  y (m, n_cols), y_slots (>= max slot + 1
  // rows, n_cols) F32. Slots outside y_slots' rows are an error (reported by the next sync on
  // a device).
  void moe_scatter(const Buffer& y, int64_t n_cols, const Buffer& slots, int64_t offset, int64_t m,
                   Buffer& y_slots);
  // out (n_tokens, n_cols) row t = sum_{r < k} weights[t, r] * y_slots[t * k + r]: each product
  // rounded to f32, added in rank order from the r = 0 product (no fused multiply-add), so
  // every backend gives the same bits. y_slots (n_tokens * k, n_cols), weights (n_tokens, k) F32.
  void moe_combine(const Buffer& y_slots, const Buffer& weights, int64_t n_tokens, int64_t k,
                   int64_t n_cols, Buffer& out);
  // x (n_tokens, n_cols) row t *= sigmoid(gate[t]), sigmoid(g) = 1 / (1 + exp(-g)), in place
  // (Qwen2-MoE's shared expert, gated by ffn_gate_inp_shexp . x).   gate F32 (>= n_tokens)
  void sigmoid_scale_rows(Buffer& x, const Buffer& gate, int64_t n_tokens, int64_t n_cols);

  // -- analysis ops on host memory (svd-embed) ------------------------------------
  // The matrix lives in host memory (a dequantized embedding, too large to keep twice on a
  // device in float64): the op moves it to the device itself, a block at a time, and returns
  // host arrays; it waits for its own work and touches no Buffer.
  //
  // Eigen-decomposition of the Gram matrix of a float32 matrix:
  //   a (m, n) row-major F32, m, n >= 1, every entry finite (checked here)
  //   G = A^T A (n, n) when m >= n, else A A^T (m, m); dim = min(m, n)
  //   G from float64 products of the (exactly widened) entries, lambda (dim,) its eigenvalues
  //   ascending by a float64 symmetric eigensolver; want_vectors (a tall A only, m >= n):
  //   vectors (dim, dim) column-major, column i of unit length for lambda[i], sign arbitrary.
  //   gram_error_norm = f64_gram_error(trace(G), max(m, n)) (core/gram_error.h).
  // Backends agree within the error model, not in bits: each sigma_i = sqrt(lambda_i) within
  // spectrum_error_bound(lambda, gram_error_norm, dim) * sigma_max of an exact SVD (about
  // 1e-8 for embedding matrices), and eigenvectors to the same relative accuracy where the
  // eigenvalues are well separated.
  GramEigen gram_eigen(const float* a, int64_t m, int64_t n, bool want_vectors);
  // gram_eigen() that may form G from float32 products where the backend measures their
  // error and it keeps every sigma within tolerance / 2 * sigma_max (gram_precision "f32",
  // gram_error_norm the measured ||G - exact G||_2); otherwise it is gram_eigen() (fell_back
  // true when it tried). 0 < tolerance < 1. The CPU's speed-up (float64 products cost it twice
  // the time); by default, and on CUDA, the float64 gram_eigen() (milliseconds on a GPU).
  GramEigen gram_eigen_checked(const float* a, int64_t m, int64_t n, double tolerance,
                               bool want_vectors);

  // -- where the buffers live, recorded steps (optional) ----------------------------------
  // Whether buffers are in device memory, so that reading logits on the host costs a download
  // (the engine then samples from top_k's candidates instead; model/forward.h).
  virtual bool device_memory() const { return false; }
  // Whether the mixture-of-experts ops run here (the routed FFN; Forward refuses a model with
  // experts on a backend without them, naming the backend).
  virtual bool supports_moe() const { return true; }
  // Recording: a device backend may record the ops of one forward step and replay them as one
  // unit (CUDA graphs), which saves the launch cost of each op. begin_recording() returns true
  // when it recorded from now on: the ops up to end_recording() are then recorded, not run, and
  // no upload, download, sync or alloc may come in between. end_recording() runs what was
  // recorded and returns true; false means the recording failed: nothing ran, the backend said
  // so once on stderr and records no more, and the caller issues the same ops again. After an
  // exception between the two, the caller calls abort_recording(why) with its message (same
  // effect as a failed end_recording()). n_tokens: the step's batch (a backend may decline some
  // sizes). Default: no recording.
  virtual bool begin_recording(int64_t /*n_tokens*/) { return false; }
  virtual bool end_recording() { return false; }
  virtual void abort_recording(const char* /*why*/) {}

 protected:
  // Implementations receive checked arguments (see the public methods above).
  virtual Buffer alloc_impl(int64_t n, BufferType type) = 0;
  virtual void upload_impl(Buffer& dst, const void* src, int64_t n, int64_t offset) = 0;
  virtual void download_impl(const Buffer& src, void* dst, int64_t n, int64_t offset) = 0;
  virtual WeightView bind_weight_impl(const WeightView& host) = 0;
  virtual void sync_impl() = 0;
  virtual void get_rows_impl(const WeightView& table, const Buffer& ids, int64_t n_tokens,
                             Buffer& out) = 0;
  virtual void rmsnorm_impl(const Buffer& x, const WeightView& w, float eps, int64_t n_tokens,
                            Buffer& out) = 0;
  virtual void matmul_impl(const WeightView& w, const Buffer& x, int64_t n_tokens, Buffer& out) = 0;
  virtual void matmul_shared_impl(const WeightView* const* ws, Buffer* const* outs, int count,
                                  const Buffer& x, int64_t n_tokens) {
    for (int i = 0; i < count; ++i) matmul_impl(*ws[i], x, n_tokens, *outs[i]);
  }
  virtual void add_bias_impl(Buffer& x, const WeightView& b, int64_t n_tokens) = 0;
  virtual void rope_impl(Buffer& x, const Buffer& positions, int64_t n_tokens, int64_t n_heads,
                         const RopeParams& p) = 0;
  virtual void kv_store_impl(const Buffer& k, const Buffer& v, const Buffer& slots,
                             int64_t n_tokens, int64_t kv_dim, Buffer& k_pool, Buffer& v_pool) = 0;
  virtual void attention_impl(const Buffer& q, const PagedKv& kv, int64_t n_tokens,
                              const AttentionShape& s, Buffer& out) = 0;
  virtual void attention_with_stats_impl(const Buffer& q, const PagedKv& kv, int64_t n_tokens,
                                         const AttentionShape& s, Buffer& out, Buffer& stats) = 0;
  virtual void top_k_impl(const Buffer& logits, int64_t n_rows, int64_t n_cols, int64_t k,
                          Buffer& ids, Buffer& values) = 0;
  // Default: downloads the rows and scans them on the host (right for host-memory backends; a
  // device backend overrides it with a kernel).
  virtual void find_nan_inf_impl(const Buffer& logits, int64_t n_rows, int64_t n_cols, Buffer& out);
  virtual void silu_mul_impl(const Buffer& gate, const Buffer& up, int64_t n, Buffer& out) = 0;
  virtual void gelu_mul_impl(const Buffer& gate, const Buffer& up, int64_t n, Buffer& out) = 0;
  virtual void swiglu_oai_impl(const Buffer& gate, const Buffer& up, int64_t n, Buffer& out) = 0;
  virtual void softcap_impl(Buffer& x, int64_t n, float cap) = 0;
  virtual void scale_impl(Buffer& x, int64_t n, float factor) = 0;
  virtual void attn_temperature_impl(Buffer& x, const Buffer& positions, int64_t n_tokens,
                                     int64_t n_cols, double beta, int64_t length) = 0;
  virtual void add_impl(Buffer& x, const Buffer& y, int64_t n) = 0;
  virtual void copy_rows_impl(const Buffer& x, int64_t row_len, const Buffer& rows, int64_t n_rows,
                              Buffer& out) = 0;
  virtual void moe_route_impl(const Buffer& logits, int64_t n_tokens, int64_t n_expert, int64_t k,
                              bool normalize, Buffer& ids, Buffer& weights) = 0;
  virtual void moe_gather_impl(const Buffer& x, int64_t n_cols, const Buffer& slots,
                               int64_t offset, int64_t m, int64_t k, Buffer& out) = 0;
  virtual void moe_scatter_impl(const Buffer& y, int64_t n_cols, const Buffer& slots,
                                int64_t offset, int64_t m, Buffer& y_slots) = 0;
  virtual void moe_combine_impl(const Buffer& y_slots, const Buffer& weights, int64_t n_tokens,
                                int64_t k, int64_t n_cols, Buffer& out) = 0;
  virtual void sigmoid_scale_rows_impl(Buffer& x, const Buffer& gate, int64_t n_tokens,
                                       int64_t n_cols) = 0;
  virtual GramEigen gram_eigen_impl(const float* a, int64_t m, int64_t n, bool want_vectors) = 0;
  // Default: gram_eigen_impl (float64 products).
  virtual GramEigen gram_eigen_checked_impl(const float* a, int64_t m, int64_t n, double tolerance,
                                            bool want_vectors);
};

}  // namespace llmctl
