// Shape and dtype checks of the backend seam, done once for every backend (backend.h).
// Each failure names the op and says what was expected and what was found.
#include "backend/backend.h"

#include <fmt/format.h>

#include "core/error.h"

namespace llmctl {

// ---------------------------------------------------------------------------
// Check helpers
// ---------------------------------------------------------------------------
namespace {

void check_size(const char* op, const char* what, const Buffer& b, int64_t expected) {
  if (b.data() == nullptr) throw Error(fmt::format("backend {}: {} is an empty buffer", op, what));
  if (b.size() != expected)
    throw Error(
        fmt::format("backend {}: {} has {} elements, expected {}", op, what, b.size(), expected));
}

void check_weight_data(const char* op, const WeightView& w) {
  if (w.data == nullptr)
    throw Error(fmt::format("backend {}: weight '{}' has no data", op, w.name));
  if (w.n_cols <= 0 || w.n_rows <= 0)
    throw Error(
        fmt::format("backend {}: weight '{}' has shape [{}, {}]", op, w.name, w.n_cols, w.n_rows));
}

void check_quantizable_weight(const char* op, const WeightView& w) {
  check_weight_data(op, w);
  if (!backend_supports_weight_type(w.type))
    throw Error(
        fmt::format("backend {}: weight '{}' has type {}, expected one of F32, F16, "
                    "BF16, Q8_0, Q4_0, Q4_1",
                    op, w.name, ggml_type_name(w.type)));
  const uint32_t block = ggml_traits(w.type).block_size;
  if (w.n_cols % block != 0)
    throw Error(
        fmt::format("backend {}: weight '{}' rows of {} elements are not whole {} blocks "
                    "of {}",
                    op, w.name, w.n_cols, ggml_type_name(w.type), block));
}

void check_f32_vector(const char* op, const WeightView& w, int64_t n) {
  check_weight_data(op, w);
  if (w.type != GgmlType::F32)
    throw Error(fmt::format("backend {}: weight '{}' has type {}, expected F32", op, w.name,
                            ggml_type_name(w.type)));
  if (w.n_cols != n || w.n_rows != 1)
    throw Error(fmt::format("backend {}: weight '{}' has shape [{}, {}], expected [{}]", op, w.name,
                            w.n_cols, w.n_rows, n));
}

}  // namespace

bool backend_supports_weight_type(GgmlType type) {
  return is_engine_type(type);
}

size_t weight_row_bytes(GgmlType type, int64_t n_cols) {
  const GgmlTypeTraits tr = ggml_traits(type);
  LLMCTL_ASSERT(n_cols >= 0 && n_cols % tr.block_size == 0);
  return static_cast<size_t>(n_cols / tr.block_size) * tr.type_size;
}

// ---------------------------------------------------------------------------
// Memory
// ---------------------------------------------------------------------------
Buffer Backend::alloc(int64_t n) {
  if (n <= 0) throw Error(fmt::format("backend alloc: {} elements, expected at least 1", n));
  return alloc_impl(n);
}

void Backend::upload(Buffer& dst, const float* src, int64_t n, int64_t offset) {
  if (n < 0 || offset < 0 || offset > dst.size() || n > dst.size() - offset)
    throw Error(fmt::format("backend upload: {} elements at offset {} do not fit a buffer of {}", n,
                            offset, dst.size()));
  if (n > 0) upload_impl(dst, src, n, offset);
}

void Backend::download(const Buffer& src, float* dst, int64_t n) {
  if (n < 0 || n > src.size())
    throw Error(fmt::format("backend download: {} elements from a buffer of {}", n, src.size()));
  if (n > 0) download_impl(src, dst, n);
}

WeightView Backend::bind_weight(const WeightView& host) {
  if (!host.present()) return host;  // an absent optional weight stays absent
  check_weight_data("bind_weight", host);
  return bind_weight_impl(host);
}

// ---------------------------------------------------------------------------
// Ops
// ---------------------------------------------------------------------------
void Backend::get_rows(const WeightView& table, int32_t id, Buffer& out) {
  check_quantizable_weight("get_rows", table);
  if (id < 0 || id >= table.n_rows)
    throw Error(fmt::format("backend get_rows: id {} is outside '{}' rows [0, {})", id, table.name,
                            table.n_rows));
  check_size("get_rows", "out", out, table.n_cols);
  get_rows_impl(table, id, out);
}

void Backend::rmsnorm(const Buffer& x, const WeightView& w, float eps, Buffer& out) {
  check_size("rmsnorm", "out", out, x.size());
  check_f32_vector("rmsnorm", w, x.size());
  if (!(eps > 0.0f))
    throw Error(fmt::format("backend rmsnorm: eps {} must be positive", static_cast<double>(eps)));
  rmsnorm_impl(x, w, eps, out);
}

void Backend::matmul(const WeightView& w, const Buffer& x, Buffer& out) {
  check_quantizable_weight("matmul", w);
  check_size("matmul", "x", x, w.n_cols);
  check_size("matmul", "out", out, w.n_rows);
  if (x.data() == out.data()) throw Error("backend matmul: x and out must not alias");
  matmul_impl(w, x, out);
}

void Backend::add_bias(Buffer& x, const WeightView& b) {
  check_f32_vector("add_bias", b, x.size());
  add_bias_impl(x, b);
}

void Backend::rope(Buffer& x, int64_t n_heads, int64_t pos, const RopeParams& p) {
  if (n_heads <= 0 || p.head_dim <= 0)
    throw Error(fmt::format("backend rope: n_heads {} and head_dim {} must be positive", n_heads,
                            p.head_dim));
  check_size("rope", "x", x, n_heads * p.head_dim);
  if (p.n_rot <= 0 || p.n_rot > p.head_dim || p.n_rot % 2 != 0)
    throw Error(fmt::format("backend rope: n_rot {} must be even and in (0, head_dim {}]", p.n_rot,
                            p.head_dim));
  if (pos < 0) throw Error(fmt::format("backend rope: position {} is negative", pos));
  rope_impl(x, n_heads, pos, p);
}

void Backend::set_row(const Buffer& src, Buffer& dst, int64_t row) {
  if (src.size() <= 0 || dst.size() % src.size() != 0)
    throw Error(fmt::format("backend set_row: dst of {} elements is not whole rows of {}",
                            dst.size(), src.size()));
  const int64_t n_rows = dst.size() / src.size();
  if (row < 0 || row >= n_rows)
    throw Error(fmt::format("backend set_row: row {} is outside [0, {})", row, n_rows));
  set_row_impl(src, dst, row);
}

void Backend::attention(const Buffer& q, const Buffer& k_cache, const Buffer& v_cache, int64_t n_kv,
                        const AttentionShape& s, Buffer& out) {
  if (s.n_heads <= 0 || s.n_kv_heads <= 0 || s.head_dim <= 0 || s.n_heads % s.n_kv_heads != 0)
    throw Error(
        fmt::format("backend attention: n_heads {}, n_kv_heads {}, head_dim {}: expected "
                    "positive values with n_kv_heads dividing n_heads",
                    s.n_heads, s.n_kv_heads, s.head_dim));
  check_size("attention", "q", q, s.n_heads * s.head_dim);
  check_size("attention", "out", out, s.n_heads * s.head_dim);
  const int64_t kv_dim = s.n_kv_heads * s.head_dim;
  if (k_cache.size() != v_cache.size() || k_cache.size() % kv_dim != 0)
    throw Error(
        fmt::format("backend attention: caches of {} and {} elements, expected equal "
                    "whole rows of {}",
                    k_cache.size(), v_cache.size(), kv_dim));
  const int64_t n_ctx = k_cache.size() / kv_dim;
  if (n_kv < 1 || n_kv > n_ctx)
    throw Error(fmt::format("backend attention: n_kv {} is outside [1, {}]", n_kv, n_ctx));
  attention_impl(q, k_cache, v_cache, n_kv, s, out);
}

void Backend::silu_mul(const Buffer& gate, const Buffer& up, Buffer& out) {
  check_size("silu_mul", "up", up, gate.size());
  check_size("silu_mul", "out", out, gate.size());
  silu_mul_impl(gate, up, out);
}

void Backend::add(Buffer& x, const Buffer& y) {
  check_size("add", "y", y, x.size());
  add_impl(x, y);
}

}  // namespace llmctl
