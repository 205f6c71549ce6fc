#pragma once
// The seam between the engine and the hardware (ARCHITECTURE.md "The backend seam").
//
// The forward pass (src/model/forward.cpp) is written once against Backend&; each backend
// (cpu/ now, cuda/ later) implements the protected *_impl methods. The public methods are
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
//   * This slice is single-token (decode-shaped): every op works on one token's vector.
//     Batched prefill will add an n_tokens dimension as new ops, not optional arguments.
//   * All calls may be asynchronous on a device backend; download() and sync() wait.

#include <cstdint>
#include <functional>
#include <string>

#include "core/ggml_type.h"
#include "core/rope_math.h"

namespace llmctl {

// ---------------------------------------------------------------------------
// Buffer: an f32 array in the backend's memory
// ---------------------------------------------------------------------------
class Buffer {
 public:
  Buffer() = default;
  Buffer(float* data, int64_t size, std::function<void(float*)> free_fn)
      : data_(data), size_(size), free_(std::move(free_fn)) {}
  ~Buffer() { reset(); }
  Buffer(Buffer&& o) noexcept : data_(o.data_), size_(o.size_), free_(std::move(o.free_)) {
    o.data_ = nullptr;
    o.size_ = 0;
    o.free_ = nullptr;
  }
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      reset();
      data_ = o.data_;
      size_ = o.size_;
      free_ = std::move(o.free_);
      o.data_ = nullptr;
      o.size_ = 0;
      o.free_ = nullptr;
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  // Address in the backend's memory space: only a CPU backend may dereference it on the host.
  float* data() const { return data_; }
  int64_t size() const { return size_; }  // elements

 private:
  void reset() noexcept {
    if (free_ && data_ != nullptr) free_(data_);
    data_ = nullptr;
    size_ = 0;
  }
  float* data_ = nullptr;
  int64_t size_ = 0;
  std::function<void(float*)> free_;
};

// ---------------------------------------------------------------------------
// WeightView: a weight tensor in place (no copy), ggml layout
// ---------------------------------------------------------------------------
struct WeightView {
  std::string name;               // GGUF tensor name, for error messages
  GgmlType type = GgmlType::F32;  // F32, F16, BF16, Q8_0, Q4_0, Q4_1 (matmul, get_rows)
  int64_t n_cols = 0;             // row length: ggml shape[0]
  int64_t n_rows = 1;             // ggml shape[1]; 1 for a vector
  const void* data = nullptr;     // host (mapping) or device address; see bind_weight()

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
};

struct AttentionShape {
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;  // divides n_heads (GQA: n_heads / n_kv_heads query heads per kv head)
  int64_t head_dim = 0;
};

// ---------------------------------------------------------------------------
// Backend
// ---------------------------------------------------------------------------
class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;

  // -- memory ---------------------------------------------------------------
  // A zero-filled buffer of n >= 1 floats.
  Buffer alloc(int64_t n);
  // dst[offset .. offset + n) = src[0 .. n)   (src in host memory)
  void upload(Buffer& dst, const float* src, int64_t n, int64_t offset = 0);
  // dst[0 .. n) = src[0 .. n)   (dst in host memory); waits for pending work.
  void download(const Buffer& src, float* dst, int64_t n);
  // A view of the same weight the backend can read (CPU: the same view).
  WeightView bind_weight(const WeightView& host);
  void sync() { sync_impl(); }

  // -- ops --------------------------------------------------------------------
  // Embedding lookup: table (n_rows, n_cols), out (n_cols,) = dequantize(table[id, :]).
  void get_rows(const WeightView& table, int32_t id, Buffer& out);
  // out (n,) = x / sqrt(mean(x^2) + eps) * w       x (n,), w F32 (n,)
  void rmsnorm(const Buffer& x, const WeightView& w, float eps, Buffer& out);
  // W (d, n) @ x (n,) -> out (d,)     W any supported dtype, x and out f32
  void matmul(const WeightView& w, const Buffer& x, Buffer& out);
  // x (n,) += b (n,)     b F32 (attention q/k/v biases)
  void add_bias(Buffer& x, const WeightView& b);
  // x (n_heads, head_dim): every head rotated for position pos (rope_math.h).
  void rope(Buffer& x, int64_t n_heads, int64_t pos, const RopeParams& p);
  // dst (n_rows, row_len) row `row` = src (row_len,)   (appending k or v to a cache)
  void set_row(const Buffer& src, Buffer& dst, int64_t row);
  // Causal attention of one query token over cache rows 0 .. n_kv - 1 (the query's own k/v
  // at row n_kv - 1 included):
  //   q (n_heads, head_dim), k_cache, v_cache (n_ctx, n_kv_heads, head_dim), n_kv <= n_ctx
  //   for head h, kv head g = h / (n_heads / n_kv_heads):
  //     s[t] = q[h] . k[t, g] / sqrt(head_dim);  a = softmax(s);  out[h] = sum_t a[t] v[t, g]
  //   out (n_heads, head_dim)
  void attention(const Buffer& q, const Buffer& k_cache, const Buffer& v_cache, int64_t n_kv,
                 const AttentionShape& s, Buffer& out);
  // out (n,) = silu(gate) * up,  silu(g) = g / (1 + exp(-g))     (SwiGLU)
  void silu_mul(const Buffer& gate, const Buffer& up, Buffer& out);
  // x (n,) += y (n,)     (residual)
  void add(Buffer& x, const Buffer& y);

 protected:
  // Implementations receive checked arguments (see the public methods above).
  virtual Buffer alloc_impl(int64_t n) = 0;
  virtual void upload_impl(Buffer& dst, const float* src, int64_t n, int64_t offset) = 0;
  virtual void download_impl(const Buffer& src, float* dst, int64_t n) = 0;
  virtual WeightView bind_weight_impl(const WeightView& host) = 0;
  virtual void sync_impl() = 0;
  virtual void get_rows_impl(const WeightView& table, int32_t id, Buffer& out) = 0;
  virtual void rmsnorm_impl(const Buffer& x, const WeightView& w, float eps, Buffer& out) = 0;
  virtual void matmul_impl(const WeightView& w, const Buffer& x, Buffer& out) = 0;
  virtual void add_bias_impl(Buffer& x, const WeightView& b) = 0;
  virtual void rope_impl(Buffer& x, int64_t n_heads, int64_t pos, const RopeParams& p) = 0;
  virtual void set_row_impl(const Buffer& src, Buffer& dst, int64_t row) = 0;
  virtual void attention_impl(const Buffer& q, const Buffer& k_cache, const Buffer& v_cache,
                              int64_t n_kv, const AttentionShape& s, Buffer& out) = 0;
  virtual void silu_mul_impl(const Buffer& gate, const Buffer& up, Buffer& out) = 0;
  virtual void add_impl(Buffer& x, const Buffer& y) = 0;
};

// Weight dtypes the ops accept for matmul and get_rows.
bool backend_supports_weight_type(GgmlType type);

}  // namespace llmctl
