// Scalar reference CPU backend (cpu_backend.h). Arguments arrive checked (backend.cpp).
#include "backend/cpu/cpu_backend.h"

#include <cmath>
#include <cstring>

#include "core/rope_math.h"
#include "core/softmax.h"
#include "quant/dequant.h"

namespace llmctl::cpu {

namespace {
size_t to_size(int64_t n) { return static_cast<size_t>(n); }

const uint8_t* row_ptr(const WeightView& w, int64_t row) {
  return static_cast<const uint8_t*>(w.data) + to_size(row) * weight_row_bytes(w.type, w.n_cols);
}

// Element i of an F32 weight. memcpy: a GGUF file with general.alignment < 4 may place a
// tensor at an address that is not float-aligned; the compiler turns this into a plain load.
float load_f32(const void* data, int64_t i) {
  float v;
  std::memcpy(&v, static_cast<const uint8_t*>(data) + to_size(i) * sizeof(float), sizeof v);
  return v;
}
}  // namespace

// ---------------------------------------------------------------------------
// Memory: plain heap arrays
// ---------------------------------------------------------------------------
Buffer CpuBackend::alloc_impl(int64_t n) {
  float* p = new float[to_size(n)]();  // zero-filled
  return Buffer(p, n, [](float* q) { delete[] q; });
}

void CpuBackend::upload_impl(Buffer& dst, const float* src, int64_t n, int64_t offset) {
  std::memcpy(dst.data() + offset, src, to_size(n) * sizeof(float));
}

void CpuBackend::download_impl(const Buffer& src, float* dst, int64_t n) {
  std::memcpy(dst, src.data(), to_size(n) * sizeof(float));
}

// ---------------------------------------------------------------------------
// Ops
// ---------------------------------------------------------------------------
// out (n_cols,) = dequantize(table[id, :])
void CpuBackend::get_rows_impl(const WeightView& table, int32_t id, Buffer& out) {
  dequantize_row(table.type, row_ptr(table, id), out.data(), table.n_cols);
}

// out = x / sqrt(mean(x^2) + eps) * w; the sum of squares in double (cheap, and it is the
// one reduction whose error scales every element of the output).
void CpuBackend::rmsnorm_impl(const Buffer& x, const WeightView& w, float eps, Buffer& out) {
  const int64_t n = x.size();
  const float* xs = x.data();
  double ss = 0.0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(xs[i]) * static_cast<double>(xs[i]);
  const auto scale =
      static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + static_cast<double>(eps)));
  float* o = out.data();
  for (int64_t i = 0; i < n; ++i) o[i] = xs[i] * scale * load_f32(w.data, i);
}

// W (d, n) @ x (n,) -> out (d,). A row at a time: dequantize into scratch (a no-op copy for
// F32), then an f32 dot product.
void CpuBackend::matmul_impl(const WeightView& w, const Buffer& x, Buffer& out) {
  const int64_t n = w.n_cols;
  const float* xs = x.data();
  float* o = out.data();
  row_scratch_.resize(to_size(n));
  for (int64_t r = 0; r < w.n_rows; ++r) {
    // F32 rows are copied too: simpler than an alignment special case, and this is the
    // reference path, not the fast one.
    dequantize_row(w.type, row_ptr(w, r), row_scratch_.data(), n);
    const float* row = row_scratch_.data();
    float acc = 0.0f;
    for (int64_t i = 0; i < n; ++i) acc += row[i] * xs[i];
    o[r] = acc;
  }
}

void CpuBackend::add_bias_impl(Buffer& x, const WeightView& b) {
  float* xs = x.data();
  for (int64_t i = 0; i < x.size(); ++i) xs[i] += load_f32(b.data, i);
}

// Every head of x (n_heads, head_dim) rotated pair by pair (rope_math.h).
void CpuBackend::rope_impl(Buffer& x, int64_t n_heads, int64_t pos, const RopeParams& p) {
  for (int64_t h = 0; h < n_heads; ++h) {
    float* head = x.data() + h * p.head_dim;
    for (int64_t i = 0; i < p.n_rot / 2; ++i) {
      int64_t i0 = 0, i1 = 0;
      rope_pair_index(p.type, i, p.n_rot, &i0, &i1);
      rope_rotate(head + i0, head + i1, rope_theta(pos, i, p.n_rot, p.freq_base, p.freq_scale));
    }
  }
}

void CpuBackend::set_row_impl(const Buffer& src, Buffer& dst, int64_t row) {
  std::memcpy(dst.data() + row * src.size(), src.data(), to_size(src.size()) * sizeof(float));
}

// For each query head h (kv head g = h / group):
//   s[t] = q[h] . k[t, g] / sqrt(head_dim),  t < n_kv;  a = softmax(s);  out[h] = sum_t a[t] v[t,
//   g]
void CpuBackend::attention_impl(const Buffer& q, const Buffer& k_cache, const Buffer& v_cache,
                                int64_t n_kv, const AttentionShape& s, Buffer& out) {
  const int64_t group = s.n_heads / s.n_kv_heads;
  const int64_t kv_dim = s.n_kv_heads * s.head_dim;
  const auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.head_dim)));
  score_scratch_.resize(to_size(n_kv));
  float* scores = score_scratch_.data();
  for (int64_t h = 0; h < s.n_heads; ++h) {
    const int64_t g = h / group;
    const float* qh = q.data() + h * s.head_dim;
    for (int64_t t = 0; t < n_kv; ++t) {
      const float* kt = k_cache.data() + t * kv_dim + g * s.head_dim;
      float dot = 0.0f;
      for (int64_t i = 0; i < s.head_dim; ++i) dot += qh[i] * kt[i];
      scores[t] = dot * scale;
    }
    softmax_inplace(scores, n_kv);
    float* oh = out.data() + h * s.head_dim;
    for (int64_t i = 0; i < s.head_dim; ++i) oh[i] = 0.0f;
    for (int64_t t = 0; t < n_kv; ++t) {
      const float* vt = v_cache.data() + t * kv_dim + g * s.head_dim;
      for (int64_t i = 0; i < s.head_dim; ++i) oh[i] += scores[t] * vt[i];
    }
  }
}

void CpuBackend::silu_mul_impl(const Buffer& gate, const Buffer& up, Buffer& out) {
  const float* g = gate.data();
  const float* u = up.data();
  float* o = out.data();
  for (int64_t i = 0; i < gate.size(); ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
}

void CpuBackend::add_impl(Buffer& x, const Buffer& y) {
  float* xs = x.data();
  const float* ys = y.data();
  for (int64_t i = 0; i < x.size(); ++i) xs[i] += ys[i];
}

}  // namespace llmctl::cpu
