// Scalar reference CPU backend (cpu_backend.h). Arguments arrive checked (backend.cpp).
#include "backend/cpu/cpu_backend.h"

#include <fmt/format.h>
#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>

#include "backend/cpu/gram_eigen_cpu.h"
#include "core/activation_math.h"
#include "core/error.h"
#include "core/fp16.h"
#include "core/rope_math.h"
#include "core/softmax.h"
#include "quant/dequant.h"
#include "quant/quantize.h"

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
// Zero-filled and aligned for any SIMD load. Large buffers (a KV pool sized for a long
// context) come straight from the kernel as anonymous mappings: their pages are zero and
// cost no resident memory until first written, so RSS follows the positions actually used.
Buffer CpuBackend::alloc_impl(int64_t n, BufferType type) {
  const size_t bytes = buffer_bytes(type, n);
  constexpr size_t kMapThreshold = size_t{1} << 20;
  if (bytes >= kMapThreshold) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      throw Error(fmt::format("cannot allocate {} bytes of memory", bytes),
                  "lower -c/--ctx-size or the batch size");
    return Buffer(p, n, type, [bytes](void* q) { munmap(q, bytes); });
  }
  void* p = ::operator new[](bytes, std::align_val_t{64});
  std::memset(p, 0, bytes);
  return Buffer(p, n, type, [](void* q) { ::operator delete[](q, std::align_val_t{64}); });
}

void CpuBackend::upload_impl(Buffer& dst, const void* src, int64_t n, int64_t offset) {
  const size_t es = buffer_type_size(dst.type());
  std::memcpy(static_cast<uint8_t*>(dst.raw()) + to_size(offset) * es, src, to_size(n) * es);
}

void CpuBackend::download_impl(const Buffer& src, void* dst, int64_t n, int64_t offset) {
  const size_t es = buffer_type_size(src.type());
  std::memcpy(dst, static_cast<const uint8_t*>(src.raw()) + to_size(offset) * es, to_size(n) * es);
}

// ---------------------------------------------------------------------------
// Ops
// ---------------------------------------------------------------------------
// out (n_tokens, n_cols) row t = dequantize(table[ids[t], :])
void CpuBackend::get_rows_impl(const WeightView& table, const Buffer& ids, int64_t n_tokens,
                               Buffer& out) {
  for (int64_t t = 0; t < n_tokens; ++t) {
    const int32_t id = ids.i32()[t];
    if (id < 0 || id >= table.n_rows)
      throw Error(fmt::format("backend get_rows: id {} is outside '{}' rows [0, {})", id,
                              table.name, table.n_rows));
    dequantize_row(table.type, row_ptr(table, id), out.data() + t * table.n_cols, table.n_cols);
  }
}

// out = x / sqrt(mean(x^2) + eps) * w per row; the sum of squares in double (cheap, and it is
// the one reduction whose error scales every element of the output).
void CpuBackend::rmsnorm_impl(const Buffer& x, const WeightView& w, float eps, int64_t n_tokens,
                              Buffer& out) {
  rmsnorm_rows(x, w, eps, 0, n_tokens, out);
}

void CpuBackend::rmsnorm_rows(const Buffer& x, const WeightView& w, float eps, int64_t t0,
                              int64_t t1, Buffer& out) {
  const int64_t n = w.n_cols;
  for (int64_t t = t0; t < t1; ++t) {
    const float* xs = x.data() + t * n;
    double ss = 0.0;
    for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(xs[i]) * static_cast<double>(xs[i]);
    const auto scale =
        static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + static_cast<double>(eps)));
    float* o = out.data() + t * n;
    for (int64_t i = 0; i < n; ++i) o[i] = xs[i] * scale * load_f32(w.data, i);
  }
}

// out (n_tokens, d) = x (n_tokens, n) @ W^T. A weight row at a time: dequantize into scratch
// (a copy for F32), then one f32 dot product per token, in element order.
void CpuBackend::matmul_impl(const WeightView& w, const Buffer& x, int64_t n_tokens, Buffer& out) {
  const int64_t n = w.n_cols;
  const int64_t d = w.n_rows;
  row_scratch_.resize(to_size(n));
  for (int64_t r = 0; r < d; ++r) {
    // F32 rows are copied too: simpler than an alignment special case, and this is the
    // reference path, not the fast one.
    dequantize_row(w.type, row_ptr(w, r), row_scratch_.data(), n);
    const float* row = row_scratch_.data();
    for (int64_t t = 0; t < n_tokens; ++t) {
      const float* xs = x.data() + t * n;
      float acc = 0.0f;
      for (int64_t i = 0; i < n; ++i) acc += row[i] * xs[i];
      out.data()[t * d + r] = acc;
    }
  }
}

void CpuBackend::add_bias_impl(Buffer& x, const WeightView& b, int64_t n_tokens) {
  const int64_t n = b.n_cols;
  for (int64_t t = 0; t < n_tokens; ++t) {
    float* xs = x.data() + t * n;
    for (int64_t i = 0; i < n; ++i) xs[i] += load_f32(b.data, i);
  }
}

// Every head of token t rotated pair by pair for position positions[t] (rope_math.h).
void CpuBackend::rope_impl(Buffer& x, const Buffer& positions, int64_t n_tokens, int64_t n_heads,
                           const RopeParams& p) {
  rope_rows(x, positions, 0, n_tokens, n_heads, p,
            rope_tables_.prepare(p, positions.i32(), n_tokens));
}

void CpuBackend::rope_rows(Buffer& x, const Buffer& positions, int64_t t0, int64_t t1,
                           int64_t n_heads, const RopeParams& p, const RopeTables::Table& table) {
  // The angles depend on the position and the pair only: cos/sin once per token (from the
  // table, which keeps them across layers and calls), then every head rotated with them.
  const int64_t n_pairs = p.n_rot / 2;
  std::vector<float> scratch(static_cast<size_t>(2 * n_pairs));
  for (int64_t t = t0; t < t1; ++t) {
    const float* cs = table.row(positions.i32()[t], scratch.data());
    for (int64_t h = 0; h < n_heads; ++h) {
      float* head = x.data() + (t * n_heads + h) * p.head_dim;
      for (int64_t i = 0; i < n_pairs; ++i) {
        int64_t i0 = 0, i1 = 0;
        rope_pair_index(p.type, i, p.n_rot, &i0, &i1);
        rope_rotate_cs(head + i0, head + i1, cs[2 * i], cs[2 * i + 1]);
      }
    }
  }
}

namespace {
// Row `slot` of a pool of rows of kv_dim values = src[0 .. kv_dim), in the pool's type: f32
// copied, f16 rounded to nearest even, Q8_0 / Q4_0 by the reference quantizer (quantize.h's
// round-to-nearest rules, byte-identical to ggml's quantize_row_q8_0_ref / q4_0_ref for
// finite values; a NaN or Inf quantizes to whatever those rules give, without an error).
void store_kv_row(Buffer& pool, int64_t slot, const float* src, int64_t kv_dim) {
  switch (pool.type()) {
    case BufferType::F32:
      std::memcpy(pool.data() + slot * kv_dim, src, to_size(kv_dim) * sizeof(float));
      break;
    case BufferType::F16: {
      uint16_t* d = pool.f16() + slot * kv_dim;
      for (int64_t i = 0; i < kv_dim; ++i) d[i] = f32_to_fp16(src[i]);
      break;
    }
    case BufferType::Q8_0:
    case BufferType::Q4_0: {
      const GgmlType gt = pool.type() == BufferType::Q8_0 ? GgmlType::Q8_0 : GgmlType::Q4_0;
      quantize_kv_row(gt, src,
                      static_cast<uint8_t*>(pool.raw()) + buffer_bytes(pool.type(), slot * kv_dim),
                      kv_dim);
      break;
    }
    case BufferType::I32:
      LLMCTL_ASSERT(false && "store_kv_row: an i32 pool");
  }
}
}  // namespace

void CpuBackend::kv_store_impl(const Buffer& k, const Buffer& v, const Buffer& slots,
                               int64_t n_tokens, int64_t kv_dim, Buffer& k_pool, Buffer& v_pool) {
  const int64_t n_slots = k_pool.size() / kv_dim;
  for (int64_t t = 0; t < n_tokens; ++t) {
    const int32_t slot = slots.i32()[t];
    LLMCTL_ASSERT(slot >= 0 && slot < n_slots);
    store_kv_row(k_pool, slot, k.data() + t * kv_dim, kv_dim);
    store_kv_row(v_pool, slot, v.data() + t * kv_dim, kv_dim);
  }
}

namespace {
// Head g of the K or V row in `slot`, as f32: in place from an f32 pool, else converted into
// `tmp` (f16 widened, Q8_0 / Q4_0 blocks dequantized by quant/dequant.h).
const float* kv_head(const Buffer& pool, int64_t slot, int64_t kv_dim, int64_t g, int64_t head_dim,
                     std::vector<float>& tmp) {
  const int64_t off = slot * kv_dim + g * head_dim;
  if (pool.type() == BufferType::F32) return pool.data() + off;
  tmp.resize(to_size(head_dim));
  if (pool.type() == BufferType::F16) {
    const uint16_t* src = pool.f16() + off;
    for (int64_t i = 0; i < head_dim; ++i) tmp[to_size(i)] = fp16_to_f32(src[i]);
    return tmp.data();
  }
  const uint8_t* src = static_cast<const uint8_t*>(pool.raw()) + buffer_bytes(pool.type(), off);
  const size_t bb = buffer_block_bytes(pool.type());
  for (int64_t i = 0; i < head_dim; i += 32) {
    const uint8_t* block = src + to_size(i / 32) * bb;
    if (pool.type() == BufferType::Q8_0)
      dequantize_block_q8_0(block, tmp.data() + i);
    else
      dequantize_block_q4_0(block, tmp.data() + i);
  }
  return tmp.data();
}
}  // namespace

// ---------------------------------------------------------------------------
// Attention statistics (AttnStat in backend.h)
// ---------------------------------------------------------------------------
void attn_raw_score_stats(const float* scores, int64_t n, float* stats) {
  float mx = -std::numeric_limits<float>::infinity();
  float mn = std::numeric_limits<float>::infinity();
  int64_t bad = 0;
  for (int64_t j = 0; j < n; ++j) {
    const float x = scores[j];
    if (!std::isfinite(x)) {
      ++bad;
    } else {
      mx = std::max(mx, x);
      mn = std::min(mn, x);
    }
  }
  stats[kAttnStatRawMax] = mx;
  stats[kAttnStatRawMin] = mn;
  stats[kAttnStatRawNonFinite] = static_cast<float>(bad);
}

void attn_score_stats(const float* scores, int64_t n, float* stats) {
  double mx = -std::numeric_limits<double>::infinity();
  double mn = std::numeric_limits<double>::infinity();
  double sum = 0.0, sum_sq = 0.0;
  int64_t n_nan = 0, n_inf = 0;
  for (int64_t j = 0; j < n; ++j) {
    const double x = static_cast<double>(scores[j]);
    if (std::isnan(x)) {
      ++n_nan;
    } else if (std::isinf(x)) {
      ++n_inf;
    } else {
      mx = std::max(mx, x);
      mn = std::min(mn, x);
      sum += x;
      sum_sq += x * x;
    }
  }
  stats[kAttnStatMax] = static_cast<float>(mx);
  stats[kAttnStatMin] = static_cast<float>(mn);
  stats[kAttnStatSum] = static_cast<float>(sum);
  stats[kAttnStatSumSq] = static_cast<float>(sum_sq);
  stats[kAttnStatNan] = static_cast<float>(n_nan);
  stats[kAttnStatInf] = static_cast<float>(n_inf);
  stats[kAttnStatCount] = static_cast<float>(n);
}

// -sum a ln a with 0 ln 0 = 0. A NaN probability is not 0, so it makes the entropy NaN, as
// the contract asks ("NaN when the softmax is").
void attn_softmax_entropy(const float* probs, int64_t n, float* stats) {
  double h = 0.0;
  for (int64_t j = 0; j < n; ++j) {
    const double a = static_cast<double>(probs[j]);
    if (a != 0.0) h -= a * std::log(a);
  }
  stats[kAttnStatEntropy] = static_cast<float>(h);
}

// Query token t at position p, head h (kv head g = h / group), j0 = first position the window
// leaves (0 without one):
//   s[j] = q[t, h] . K[j, g] * scale, j0 <= j <= p;  capped when s.softcap > 0;
//   a = softmax(s) (with the head's sink in its denominator, when s.sinks);
//   out[t, h] = sum_j a[j] V[j, g]
// Positions before j0 are not read (not masked with -inf: the same result, and their blocks
// may be gone).
void CpuBackend::attend_head(const Buffer& q, const PagedKv& kv, int64_t t, int64_t h,
                             const AttentionShape& s, Buffer& out, std::vector<float>& scores,
                             std::vector<float>& kv_row, float* stats) {
  const int64_t group = s.n_heads / s.n_kv_heads;
  const int64_t kv_dim = s.n_kv_heads * s.head_dim;
  const int64_t n_blocks = kv.k_pool->size() / (kv_dim * kv.block_size);
  const float scale = attention_scale(s);
  const int32_t row = kv.token_seq->i32()[t];
  const int32_t pos = kv.positions->i32()[t];
  LLMCTL_ASSERT(row >= 0 && pos >= 0 && (pos / kv.block_size) < kv.max_blocks);
  LLMCTL_ASSERT((static_cast<int64_t>(row) + 1) * kv.max_blocks <= kv.block_table->size());
  const int32_t* blocks = kv.block_table->i32() + row * kv.max_blocks;
  const int64_t j0 = attention_first_position(pos, s.window);
  const int64_t n_kv = int64_t{pos} + 1 - j0;  // scores[i] is position j0 + i
  scores.resize(to_size(n_kv));
  const auto slot_of = [&](int64_t i) {
    const int64_t j = j0 + i;
    const int32_t b = blocks[j / kv.block_size];
    LLMCTL_ASSERT(b >= 0 && b < n_blocks);
    return int64_t{b} * kv.block_size + j % kv.block_size;
  };
  const int64_t g = h / group;
  const float* qh = q.data() + (t * s.n_heads + h) * s.head_dim;
  for (int64_t j = 0; j < n_kv; ++j) {
    const float* kj = kv_head(*kv.k_pool, slot_of(j), kv_dim, g, s.head_dim, kv_row);
    float dot = 0.0f;
    for (int64_t i = 0; i < s.head_dim; ++i) dot += qh[i] * kj[i];
    scores[to_size(j)] = dot * scale;
  }
  if (stats != nullptr) attn_raw_score_stats(scores.data(), n_kv, stats);
  if (s.softcap > 0.0f)
    for (float& x : scores) x = softcap_score(x, s.softcap);
  if (stats != nullptr) attn_score_stats(scores.data(), n_kv, stats);
  if (s.sinks.present())
    softmax_sink_inplace(scores.data(), n_kv, static_cast<const float*>(s.sinks.data)[h]);
  else
    softmax_inplace(scores.data(), n_kv);
  if (stats != nullptr) attn_softmax_entropy(scores.data(), n_kv, stats);
  float* oh = out.data() + (t * s.n_heads + h) * s.head_dim;
  for (int64_t i = 0; i < s.head_dim; ++i) oh[i] = 0.0f;
  for (int64_t j = 0; j < n_kv; ++j) {
    const float* vj = kv_head(*kv.v_pool, slot_of(j), kv_dim, g, s.head_dim, kv_row);
    const float a = scores[to_size(j)];
    for (int64_t i = 0; i < s.head_dim; ++i) oh[i] += a * vj[i];
  }
}

void CpuBackend::attention_impl(const Buffer& q, const PagedKv& kv, int64_t n_tokens,
                                const AttentionShape& s, Buffer& out) {
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t h = 0; h < s.n_heads; ++h)
      attend_head(q, kv, t, h, s, out, score_scratch_, kv_row_scratch_);
}

// The same per-head code as attention_impl, with each (token, head)'s statistics written
// into its row of stats (n_tokens, n_heads, kAttnStatFields).
void CpuBackend::attention_with_stats_impl(const Buffer& q, const PagedKv& kv, int64_t n_tokens,
                                           const AttentionShape& s, Buffer& out, Buffer& stats) {
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t h = 0; h < s.n_heads; ++h)
      attend_head(q, kv, t, h, s, out, score_scratch_, kv_row_scratch_,
                  stats.data() + (t * s.n_heads + h) * kAttnStatFields);
}

// Per row: indices sorted by (value descending, NaN last, index ascending); the first k kept.
// partial_sort with a strict weak order, so the result does not depend on the library.
void CpuBackend::top_k_impl(const Buffer& logits, int64_t n_rows, int64_t n_cols, int64_t k,
                            Buffer& ids, Buffer& values) {
  std::vector<int32_t> order(to_size(n_cols));
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* row = logits.data() + r * n_cols;
    for (int64_t i = 0; i < n_cols; ++i) order[to_size(i)] = static_cast<int32_t>(i);
    const auto before = [row](int32_t a, int32_t b) {
      const float va = row[a];
      const float vb = row[b];
      const bool na = std::isnan(va);
      const bool nb = std::isnan(vb);
      if (na != nb) return nb;  // a number ranks above NaN
      if (!na && va != vb) return va > vb;
      return a < b;
    };
    std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
    for (int64_t j = 0; j < k; ++j) {
      const int32_t id = order[to_size(j)];
      ids.i32()[r * k + j] = id;
      values.data()[r * k + j] = row[id];
    }
  }
}

void CpuBackend::silu_mul_impl(const Buffer& gate, const Buffer& up, int64_t n, Buffer& out) {
  silu_mul_range(gate, up, 0, n, out);
}

void CpuBackend::silu_mul_range(const Buffer& gate, const Buffer& up, int64_t i0, int64_t i1,
                                Buffer& out) {
  const float* g = gate.data();
  const float* u = up.data();
  float* o = out.data();
  for (int64_t i = i0; i < i1; ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
}

void CpuBackend::gelu_mul_impl(const Buffer& gate, const Buffer& up, int64_t n, Buffer& out) {
  gelu_mul_range(gate, up, 0, n, out);
}

void CpuBackend::gelu_mul_range(const Buffer& gate, const Buffer& up, int64_t i0, int64_t i1,
                                Buffer& out) {
  const float* g = gate.data();
  const float* u = up.data();
  float* o = out.data();
  for (int64_t i = i0; i < i1; ++i) o[i] = gelu_tanh(g[i]) * u[i];
}

void CpuBackend::softcap_impl(Buffer& x, int64_t n, float cap) { softcap_range(x, 0, n, cap); }

// One multiply per element: cheap next to a matmul, so the fast backend uses it as is.
void CpuBackend::scale_impl(Buffer& x, int64_t n, float factor) {
  float* xs = x.data();
  for (int64_t i = 0; i < n; ++i) xs[i] *= factor;
}

// One factor per row and one multiply per element: the fast backend uses it as is, as scale.
void CpuBackend::attn_temperature_impl(Buffer& x, const Buffer& positions, int64_t n_tokens,
                                       int64_t n_cols, double beta, int64_t length) {
  float* xs = x.data();
  const int32_t* pos = positions.i32();
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float f = llmctl::attn_temperature(pos[t], beta, length);
    float* row = xs + t * n_cols;
    for (int64_t i = 0; i < n_cols; ++i) row[i] *= f;
  }
}

void CpuBackend::softcap_range(Buffer& x, int64_t i0, int64_t i1, float cap) {
  float* xs = x.data();
  for (int64_t i = i0; i < i1; ++i) xs[i] = softcap_score(xs[i], cap);
}

void CpuBackend::add_impl(Buffer& x, const Buffer& y, int64_t n) {
  float* xs = x.data();
  const float* ys = y.data();
  for (int64_t i = 0; i < n; ++i) xs[i] += ys[i];
}

void CpuBackend::copy_rows_impl(const Buffer& x, int64_t row_len, const Buffer& rows,
                                int64_t n_rows, Buffer& out) {
  const int64_t x_rows = x.size() / row_len;
  for (int64_t i = 0; i < n_rows; ++i) {
    const int32_t r = rows.i32()[i];
    if (r < 0 || r >= x_rows)
      throw Error(fmt::format("backend copy_rows: row {} is outside [0, {})", r, x_rows));
    std::memcpy(out.data() + i * row_len, x.data() + int64_t{r} * row_len,
                to_size(row_len) * sizeof(float));
  }
}

GramEigen CpuBackend::gram_eigen_impl(const float* a, int64_t m, int64_t n, bool want_vectors) {
  return cpu::gram_eigen_f64(a, m, n, want_vectors, n_threads());
}

GramEigen CpuBackend::gram_eigen_checked_impl(const float* a, int64_t m, int64_t n,
                                              double tolerance, bool want_vectors) {
  return cpu::gram_eigen_checked(a, m, n, tolerance, want_vectors, n_threads());
}

}  // namespace llmctl::cpu
