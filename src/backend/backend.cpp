// Shape and dtype checks of the backend seam, done once for every backend (backend.h).
// Each failure names the op and says what was expected and what was found. The helpers they
// share: backend_checks.h; the mixture-of-experts ops: backend_moe.cpp.
#include "backend/backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "backend/backend_checks.h"
#include "core/error.h"

namespace llmctl {

using namespace backend_checks;

bool backend_supports_weight_type(GgmlType type) { return is_engine_type(type); }

size_t weight_row_bytes(GgmlType type, int64_t n_cols) {
  const GgmlTypeTraits tr = ggml_traits(type);
  LLMCTL_ASSERT(n_cols >= 0 && n_cols % tr.block_size == 0);
  return static_cast<size_t>(n_cols / tr.block_size) * tr.type_size;
}

// ---------------------------------------------------------------------------
// Buffer
// ---------------------------------------------------------------------------
const char* buffer_type_name(BufferType t) {
  switch (t) {
    case BufferType::F32:
      return "f32";
    case BufferType::F16:
      return "f16";
    case BufferType::I32:
      return "i32";
    case BufferType::Q8_0:
      return "q8_0";
    case BufferType::Q4_0:
      return "q4_0";
  }
  return "?";
}

size_t buffer_type_size(BufferType t) {
  LLMCTL_ASSERT(!buffer_type_is_block(t));
  return t == BufferType::F16 ? 2 : 4;
}

int64_t buffer_block_elems(BufferType t) {
  return t == BufferType::Q8_0 || t == BufferType::Q4_0 ? 32 : 1;
}

size_t buffer_block_bytes(BufferType t) {
  switch (t) {
    case BufferType::Q8_0:
      return 34;
    case BufferType::Q4_0:
      return 18;
    case BufferType::F16:
      return 2;
    default:
      return 4;
  }
}

size_t buffer_bytes(BufferType t, int64_t n) {
  const int64_t be = buffer_block_elems(t);
  LLMCTL_ASSERT(n >= 0 && n % be == 0);
  return static_cast<size_t>(n / be) * buffer_block_bytes(t);
}

void Buffer::type_mismatch(BufferType want) const {
  throw Error(fmt::format("backend buffer: {} elements used as {}", buffer_type_name(type_),
                          buffer_type_name(want)));
}

// ---------------------------------------------------------------------------
// Memory
// ---------------------------------------------------------------------------
Buffer Backend::alloc(int64_t n, BufferType type) {
  if (n <= 0) throw Error(fmt::format("backend alloc: {} elements, expected at least 1", n));
  if (n % buffer_block_elems(type) != 0)
    throw Error(fmt::format("backend alloc: {} {} values, expected whole blocks of {}", n,
                            buffer_type_name(type), buffer_block_elems(type)));
  return alloc_impl(n, type);
}

namespace {
void check_range(const char* op, const Buffer& b, int64_t n, int64_t offset) {
  if (n < 0 || offset < 0 || offset > b.size() || n > b.size() - offset)
    throw Error(fmt::format("backend {}: {} elements at offset {} do not fit a buffer of {}", op, n,
                            offset, b.size()));
}
}  // namespace

void Backend::upload(Buffer& dst, const float* src, int64_t n, int64_t offset) {
  check_buffer("upload", "dst", dst, BufferType::F32, 0);
  check_range("upload", dst, n, offset);
  if (n > 0) upload_impl(dst, src, n, offset);
}

void Backend::upload(Buffer& dst, const int32_t* src, int64_t n, int64_t offset) {
  check_buffer("upload", "dst", dst, BufferType::I32, 0);
  check_range("upload", dst, n, offset);
  if (n > 0) upload_impl(dst, src, n, offset);
}

void Backend::download(const Buffer& src, float* dst, int64_t n, int64_t offset) {
  check_buffer("download", "src", src, BufferType::F32, 0);
  check_range("download", src, n, offset);
  if (n > 0) download_impl(src, dst, n, offset);
}

void Backend::download(const Buffer& src, int32_t* dst, int64_t n, int64_t offset) {
  check_buffer("download", "src", src, BufferType::I32, 0);
  check_range("download", src, n, offset);
  if (n > 0) download_impl(src, dst, n, offset);
}

WeightView Backend::bind_weight(const WeightView& host) {
  if (!host.present()) return host;  // an absent optional weight stays absent
  check_weight_data("bind_weight", host);
  if (!supports_weight_type(host.type))
    throw Error(fmt::format("the {} backend has no kernels for {} weights (tensor '{}')", name(),
                            ggml_type_name(host.type), host.name),
                "run on another device (--device cpu) or quantize the model to a type it has");
  return bind_weight_impl(host);
}

// ---------------------------------------------------------------------------
// Ops
// ---------------------------------------------------------------------------
void Backend::get_rows(const WeightView& table, const Buffer& ids, int64_t n_tokens, Buffer& out) {
  check_quantizable_weight("get_rows", table);
  check_n_tokens("get_rows", n_tokens);
  check_i32("get_rows", "ids", ids, n_tokens);
  check_f32("get_rows", "out", out, n_tokens * table.n_cols);
  get_rows_impl(table, ids, n_tokens, out);
}

void Backend::rmsnorm(const Buffer& x, const WeightView& w, float eps, int64_t n_tokens,
                      Buffer& out) {
  check_weight_data("rmsnorm", w);
  check_f32_vector("rmsnorm", w, w.n_cols);
  check_n_tokens("rmsnorm", n_tokens);
  check_f32("rmsnorm", "x", x, n_tokens * w.n_cols);
  check_f32("rmsnorm", "out", out, n_tokens * w.n_cols);
  if (!(eps > 0.0f))
    throw Error(fmt::format("backend rmsnorm: eps {} must be positive", static_cast<double>(eps)));
  rmsnorm_impl(x, w, eps, n_tokens, out);
}

void Backend::matmul(const WeightView& w, const Buffer& x, int64_t n_tokens, Buffer& out) {
  check_quantizable_weight("matmul", w);
  check_n_tokens("matmul", n_tokens);
  check_f32("matmul", "x", x, n_tokens * w.n_cols);
  check_f32("matmul", "out", out, n_tokens * w.n_rows);
  if (x.raw() == out.raw()) throw Error("backend matmul: x and out must not alias");
  matmul_impl(w, x, n_tokens, out);
}

void Backend::matmul_shared(const WeightView* const* ws, Buffer* const* outs, int count,
                            const Buffer& x, int64_t n_tokens) {
  if (count < 1 || count > kMaxSharedMatmuls)
    throw Error(fmt::format("backend matmul_shared: expected 1 to {} weights, got {}",
                            kMaxSharedMatmuls, count));
  check_n_tokens("matmul_shared", n_tokens);
  for (int i = 0; i < count; ++i) {
    const WeightView& w = *ws[i];
    check_quantizable_weight("matmul_shared", w);
    if (w.n_cols != ws[0]->n_cols)
      throw Error(fmt::format("backend matmul_shared: '{}' has rows of {} elements, '{}' of {}",
                              w.name, w.n_cols, ws[0]->name, ws[0]->n_cols));
    check_f32("matmul_shared", "out", *outs[i], n_tokens * w.n_rows);
    if (x.raw() == outs[i]->raw())
      throw Error(fmt::format("backend matmul_shared: the output of '{}' aliases x", w.name));
    for (int j = 0; j < i; ++j)
      if (outs[j]->raw() == outs[i]->raw())
        throw Error(fmt::format("backend matmul_shared: '{}' and '{}' write the same buffer",
                                ws[j]->name, w.name));
  }
  check_f32("matmul_shared", "x", x, n_tokens * ws[0]->n_cols);
  matmul_shared_impl(ws, outs, count, x, n_tokens);
}

void Backend::add_bias(Buffer& x, const WeightView& b, int64_t n_tokens) {
  check_weight_data("add_bias", b);
  check_f32_vector("add_bias", b, b.n_cols);
  check_n_tokens("add_bias", n_tokens);
  check_f32("add_bias", "x", x, n_tokens * b.n_cols);
  add_bias_impl(x, b, n_tokens);
}

void Backend::rope(Buffer& x, const Buffer& positions, int64_t n_tokens, int64_t n_heads,
                   const RopeParams& p) {
  if (n_heads <= 0 || p.head_dim <= 0)
    throw Error(fmt::format("backend rope: n_heads {} and head_dim {} must be positive", n_heads,
                            p.head_dim));
  check_n_tokens("rope", n_tokens);
  check_f32("rope", "x", x, n_tokens * n_heads * p.head_dim);
  check_i32("rope", "positions", positions, n_tokens);
  if (p.n_rot <= 0 || p.n_rot > p.head_dim || p.n_rot % 2 != 0)
    throw Error(fmt::format("backend rope: n_rot {} must be even and in (0, head_dim {}]", p.n_rot,
                            p.head_dim));
  if (p.freq_factors.present()) check_f32_vector("rope", p.freq_factors, p.n_rot / 2);
  if (!(std::isfinite(p.ext_factor) && std::isfinite(p.yarn_low) && std::isfinite(p.yarn_high) &&
        std::isfinite(p.mscale) && p.mscale > 0.0))
    throw Error(
        fmt::format("backend rope: YaRN ext_factor {}, range [{}, {}] and mscale {} must "
                    "be finite (mscale > 0)",
                    p.ext_factor, p.yarn_low, p.yarn_high, p.mscale));
  rope_impl(x, positions, n_tokens, n_heads, p);
}

namespace {
// K and V pools: each F32, F16, Q8_0 or Q4_0 (their own types), of equal size, whole blocks of
// block_size rows of kv_dim; a block type needs `unit` (kv_store: the row, attention: a head)
// to be whole 32-value blocks.
void check_kv_pools(const char* op, const Buffer& kp, const Buffer& vp, int64_t kv_dim,
                    int64_t block_size, int64_t unit) {
  if (kp.type() == BufferType::I32 || vp.type() == BufferType::I32 || kp.size() != vp.size() ||
      block_size < 1 || kp.size() % (kv_dim * block_size) != 0)
    throw Error(
        fmt::format("backend {}: pools {} ({} elements) and {} ({}), expected pools of equal "
                    "size (f32, f16, q8_0 or q4_0) of whole blocks of {} rows of {}",
                    op, buffer_type_name(kp.type()), kp.size(), buffer_type_name(vp.type()),
                    vp.size(), block_size, kv_dim));
  for (const Buffer* p : {&kp, &vp})
    if (unit % buffer_block_elems(p->type()) != 0)
      throw Error(fmt::format("backend {}: a {} pool holds blocks of {} values; {} of {} is not "
                              "a whole number of them (kv_dim {})",
                              op, buffer_type_name(p->type()), buffer_block_elems(p->type()),
                              unit == kv_dim ? "a row" : "a head", unit, kv_dim));
}
}  // namespace

void Backend::kv_store(const Buffer& k, const Buffer& v, const Buffer& slots, int64_t n_tokens,
                       int64_t kv_dim, Buffer& k_pool, Buffer& v_pool) {
  check_n_tokens("kv_store", n_tokens);
  if (kv_dim < 1) throw Error(fmt::format("backend kv_store: kv_dim {} must be positive", kv_dim));
  check_f32("kv_store", "k", k, n_tokens * kv_dim);
  check_f32("kv_store", "v", v, n_tokens * kv_dim);
  check_i32("kv_store", "slots", slots, n_tokens);
  check_kv_pools("kv_store", k_pool, v_pool, kv_dim, 1, kv_dim);
  kv_store_impl(k, v, slots, n_tokens, kv_dim, k_pool, v_pool);
}

namespace {
void check_attention(const Buffer& q, const PagedKv& kv, int64_t n_tokens, const AttentionShape& s,
                     const Buffer& out) {
  if (s.n_heads <= 0 || s.n_kv_heads <= 0 || s.head_dim <= 0 || s.n_heads % s.n_kv_heads != 0)
    throw Error(
        fmt::format("backend attention: n_heads {}, n_kv_heads {}, head_dim {}: expected "
                    "positive values with n_kv_heads dividing n_heads",
                    s.n_heads, s.n_kv_heads, s.head_dim));
  check_n_tokens("attention", n_tokens);
  check_f32("attention", "q", q, n_tokens * s.n_heads * s.head_dim);
  check_f32("attention", "out", out, n_tokens * s.n_heads * s.head_dim);
  if (kv.k_pool == nullptr || kv.v_pool == nullptr || kv.block_table == nullptr ||
      kv.token_seq == nullptr || kv.positions == nullptr)
    throw Error("backend attention: the paged KV description is incomplete");
  const int64_t kv_dim = s.n_kv_heads * s.head_dim;
  check_kv_pools("attention", *kv.k_pool, *kv.v_pool, kv_dim, kv.block_size, s.head_dim);
  if (kv.max_blocks < 1)
    throw Error(fmt::format("backend attention: max_blocks {} must be positive", kv.max_blocks));
  check_i32("attention", "block_table", *kv.block_table, kv.max_blocks);
  check_i32("attention", "token_seq", *kv.token_seq, n_tokens);
  check_i32("attention", "positions", *kv.positions, n_tokens);
  // !(x >= 0) also refuses NaN
  if (!(s.scale >= 0.0f) || !std::isfinite(s.scale) || !(s.softcap >= 0.0f) ||
      !std::isfinite(s.softcap) || s.window < 0)
    throw Error(
        fmt::format("backend attention: scale {}, softcap {}, window {}: expected finite "
                    "scale and softcap >= 0 and window >= 0 (0 = the default)",
                    static_cast<double>(s.scale), static_cast<double>(s.softcap), s.window));
  if (s.sinks.present()) check_f32_vector("attention", s.sinks, s.n_heads);
}
}  // namespace

float attention_scale(const AttentionShape& s) {
  if (s.scale != 0.0f) return s.scale;
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.head_dim)));
}

void Backend::attention(const Buffer& q, const PagedKv& kv, int64_t n_tokens,
                        const AttentionShape& s, Buffer& out) {
  check_attention(q, kv, n_tokens, s, out);
  attention_impl(q, kv, n_tokens, s, out);
}

void Backend::attention_with_stats(const Buffer& q, const PagedKv& kv, int64_t n_tokens,
                                   const AttentionShape& s, Buffer& out, Buffer& stats) {
  check_attention(q, kv, n_tokens, s, out);
  check_f32("attention_with_stats", "stats", stats, n_tokens * s.n_heads * kAttnStatFields);
  attention_with_stats_impl(q, kv, n_tokens, s, out, stats);
}

void Backend::top_k(const Buffer& logits, int64_t n_rows, int64_t n_cols, int64_t k, Buffer& ids,
                    Buffer& values) {
  check_n_tokens("top_k", n_rows);
  if (n_cols < 1 || k < 1 || k > n_cols)
    throw Error(
        fmt::format("backend top_k: k {} for rows of {}, expected 1 <= k <= n_cols", k, n_cols));
  check_f32("top_k", "logits", logits, n_rows * n_cols);
  check_i32("top_k", "ids", ids, n_rows * k);
  check_f32("top_k", "values", values, n_rows * k);
  top_k_impl(logits, n_rows, n_cols, k, ids, values);
}

void Backend::find_nan_inf(const Buffer& logits, int64_t n_rows, int64_t n_cols, Buffer& out) {
  check_n_tokens("find_nan_inf", n_rows);
  if (n_cols < 1 || n_cols > INT32_MAX)
    throw Error(fmt::format("backend find_nan_inf: rows of {}, expected 1 to 2^31 - 1", n_cols));
  check_f32("find_nan_inf", "logits", logits, n_rows * n_cols);
  check_i32("find_nan_inf", "out", out, n_rows * 2);
  find_nan_inf_impl(logits, n_rows, n_cols, out);
}

// Through download/upload, so it is right for any backend; a device backend overrides it.
void Backend::find_nan_inf_impl(const Buffer& logits, int64_t n_rows, int64_t n_cols, Buffer& out) {
  std::vector<float> row(static_cast<size_t>(n_cols));
  std::vector<int32_t> found(static_cast<size_t>(n_rows * 2), -1);
  for (int64_t r = 0; r < n_rows; ++r) {
    download(logits, row.data(), n_cols, r * n_cols);
    int32_t& nan = found[static_cast<size_t>(2 * r)];
    int32_t& inf = found[static_cast<size_t>(2 * r + 1)];
    for (int64_t i = 0; i < n_cols && (nan < 0 || inf < 0); ++i) {
      const float v = row[static_cast<size_t>(i)];
      if (nan < 0 && std::isnan(v)) nan = static_cast<int32_t>(i);
      if (inf < 0 && v == std::numeric_limits<float>::infinity()) inf = static_cast<int32_t>(i);
    }
  }
  upload(out, found.data(), n_rows * 2);
}

void Backend::silu_mul(const Buffer& gate, const Buffer& up, int64_t n, Buffer& out) {
  check_n_tokens("silu_mul", n);
  check_f32("silu_mul", "gate", gate, n);
  check_f32("silu_mul", "up", up, n);
  check_f32("silu_mul", "out", out, n);
  silu_mul_impl(gate, up, n, out);
}

void Backend::swiglu_oai(const Buffer& gate, const Buffer& up, int64_t n, Buffer& out) {
  check_n_tokens("swiglu_oai", n);
  check_f32("swiglu_oai", "gate", gate, n);
  check_f32("swiglu_oai", "up", up, n);
  check_f32("swiglu_oai", "out", out, n);
  swiglu_oai_impl(gate, up, n, out);
}

void Backend::gelu_mul(const Buffer& gate, const Buffer& up, int64_t n, Buffer& out) {
  check_n_tokens("gelu_mul", n);
  check_f32("gelu_mul", "gate", gate, n);
  check_f32("gelu_mul", "up", up, n);
  check_f32("gelu_mul", "out", out, n);
  gelu_mul_impl(gate, up, n, out);
}

void Backend::softcap(Buffer& x, int64_t n, float cap) {
  check_n_tokens("softcap", n);
  check_f32("softcap", "x", x, n);
  if (!(cap > 0.0f) || !std::isfinite(cap))
    throw Error(fmt::format("backend softcap: cap {}, expected a finite value > 0",
                            static_cast<double>(cap)));
  softcap_impl(x, n, cap);
}

void Backend::scale(Buffer& x, int64_t n, float factor) {
  check_n_tokens("scale", n);
  check_f32("scale", "x", x, n);
  if (!std::isfinite(factor))
    throw Error(fmt::format("backend scale: factor {}, expected a finite value",
                            static_cast<double>(factor)));
  scale_impl(x, n, factor);
}

void Backend::attn_temperature(Buffer& x, const Buffer& positions, int64_t n_tokens,
                               int64_t n_cols, double beta, int64_t length) {
  check_n_tokens("attn_temperature", n_tokens);
  if (n_cols < 1 || length < 1 || !std::isfinite(beta))
    throw Error(fmt::format("backend attn_temperature: row length {}, length {} and beta {}, "
                            "expected >= 1, >= 1 and finite",
                            n_cols, length, beta));
  check_f32("attn_temperature", "x", x, n_tokens * n_cols);
  check_i32("attn_temperature", "positions", positions, n_tokens);
  attn_temperature_impl(x, positions, n_tokens, n_cols, beta, length);
}

void Backend::add(Buffer& x, const Buffer& y, int64_t n) {
  check_n_tokens("add", n);
  check_f32("add", "x", x, n);
  check_f32("add", "y", y, n);
  add_impl(x, y, n);
}

void Backend::copy_rows(const Buffer& x, int64_t row_len, const Buffer& rows, int64_t n_rows,
                        Buffer& out) {
  check_n_tokens("copy_rows", n_rows);
  if (row_len < 1 || x.size() < row_len)
    throw Error(
        fmt::format("backend copy_rows: row length {} for a buffer of {}", row_len, x.size()));
  check_f32("copy_rows", "x", x, row_len);
  check_i32("copy_rows", "rows", rows, n_rows);
  check_f32("copy_rows", "out", out, n_rows * row_len);
  if (x.raw() == out.raw()) throw Error("backend copy_rows: x and out must not alias");
  copy_rows_impl(x, row_len, rows, n_rows, out);
}

// ---------------------------------------------------------------------------
// Gram eigen-decomposition (host memory)
// ---------------------------------------------------------------------------
namespace {

void check_gram_input(const char* op, const float* a, int64_t m, int64_t n, bool want_vectors) {
  if (m <= 0 || n <= 0) throw Error(fmt::format("backend {}: empty matrix ({} x {})", op, m, n));
  if (a == nullptr) throw Error(fmt::format("backend {}: no matrix data", op));
  if (want_vectors && m < n)
    throw Error(fmt::format(
        "backend {}: eigenvectors asked for a wide {} x {} matrix (only A^T A of a tall one)", op,
        m, n));
  for (int64_t i = 0; i < m * n; ++i) {
    if (!std::isfinite(a[i]))
      throw Error(fmt::format("matrix entry ({}, {}) is {}; the spectrum needs finite values",
                              i / n, i % n, static_cast<double>(a[i])));
  }
}

// The result has the contract's shape: dim eigenvalues, and dim * dim vector entries if asked.
void check_gram_result(const char* op, const char* backend, const GramEigen& g, int64_t m,
                       int64_t n, bool want_vectors) {
  const int64_t dim = std::min(m, n);
  if (static_cast<int64_t>(g.lambda.size()) != dim ||
      (want_vectors && static_cast<int64_t>(g.vectors.size()) != dim * dim))
    throw Error(
        fmt::format("backend {}: the {} backend returned {} eigenvalues and {} vector entries for "
                    "a {} x {} Gram matrix",
                    op, backend, g.lambda.size(), g.vectors.size(), dim, dim));
}

}  // namespace

GramEigen Backend::gram_eigen(const float* a, int64_t m, int64_t n, bool want_vectors) {
  check_gram_input("gram_eigen", a, m, n, want_vectors);
  GramEigen g = gram_eigen_impl(a, m, n, want_vectors);
  check_gram_result("gram_eigen", name(), g, m, n, want_vectors);
  return g;
}

GramEigen Backend::gram_eigen_checked(const float* a, int64_t m, int64_t n, double tolerance,
                                      bool want_vectors) {
  check_gram_input("gram_eigen_checked", a, m, n, want_vectors);
  if (!(tolerance > 0 && tolerance < 1))
    throw Error(
        fmt::format("backend gram_eigen_checked: tolerance {}, expected 0 < t < 1", tolerance));
  GramEigen g = gram_eigen_checked_impl(a, m, n, tolerance, want_vectors);
  check_gram_result("gram_eigen_checked", name(), g, m, n, want_vectors);
  return g;
}

GramEigen Backend::gram_eigen_checked_impl(const float* a, int64_t m, int64_t n,
                                           double /*tolerance*/, bool want_vectors) {
  return gram_eigen_impl(a, m, n, want_vectors);
}

}  // namespace llmctl
