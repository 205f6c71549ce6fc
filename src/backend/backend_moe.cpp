// The mixture-of-experts ops of the backend seam (backend.h): their shape and dtype checks,
// done once for every backend.
#include <fmt/format.h>

#include "backend/backend.h"
#include "backend/backend_checks.h"
#include "core/error.h"

namespace llmctl {

using namespace backend_checks;

// ---------------------------------------------------------------------------
// Mixture of experts
// ---------------------------------------------------------------------------
namespace {

void check_moe_slots(const char* op, const Buffer& slots, int64_t offset, int64_t m) {
  if (offset < 0) throw Error(fmt::format("backend {}: slot offset {} is negative", op, offset));
  check_i32(op, "slots", slots, offset + m);
}

}  // namespace

void Backend::moe_route(const Buffer& logits, int64_t n_tokens, int64_t n_expert, int64_t k,
                        bool normalize, Buffer& ids, Buffer& weights) {
  check_n_tokens("moe_route", n_tokens);
  if (n_expert < 1 || k < 1 || k > n_expert)
    throw Error(fmt::format("backend moe_route: {} experts per token of {}, expected 1 <= k <= {}",
                            k, n_expert, n_expert));
  check_f32("moe_route", "logits", logits, n_tokens * n_expert);
  check_i32("moe_route", "ids", ids, n_tokens * k);
  check_f32("moe_route", "weights", weights, n_tokens * k);
  moe_route_impl(logits, n_tokens, n_expert, k, normalize, ids, weights);
}

void Backend::moe_gather(const Buffer& x, int64_t n_cols, const Buffer& slots, int64_t offset,
                         int64_t m, int64_t k, Buffer& out) {
  check_n_tokens("moe_gather", m);
  if (n_cols < 1 || k < 1)
    throw Error(
        fmt::format("backend moe_gather: row length {} and k {}, expected both >= 1", n_cols, k));
  check_f32("moe_gather", "x", x, n_cols);
  check_moe_slots("moe_gather", slots, offset, m);
  check_f32("moe_gather", "out", out, m * n_cols);
  if (x.raw() == out.raw()) throw Error("backend moe_gather: x and out must not alias");
  moe_gather_impl(x, n_cols, slots, offset, m, k, out);
}

void Backend::moe_scatter(const Buffer& y, int64_t n_cols, const Buffer& slots, int64_t offset,
                          int64_t m, Buffer& y_slots) {
  check_n_tokens("moe_scatter", m);
  if (n_cols < 1)
    throw Error(fmt::format("backend moe_scatter: row length {}, expected >= 1", n_cols));
  check_f32("moe_scatter", "y", y, m * n_cols);
  check_moe_slots("moe_scatter", slots, offset, m);
  check_f32("moe_scatter", "y_slots", y_slots, n_cols);
  if (y.raw() == y_slots.raw()) throw Error("backend moe_scatter: y and y_slots must not alias");
  moe_scatter_impl(y, n_cols, slots, offset, m, y_slots);
}

void Backend::moe_combine(const Buffer& y_slots, const Buffer& weights, int64_t n_tokens, int64_t k,
                          int64_t n_cols, Buffer& out) {
  check_n_tokens("moe_combine", n_tokens);
  if (n_cols < 1 || k < 1)
    throw Error(
        fmt::format("backend moe_combine: row length {} and k {}, expected both >= 1", n_cols, k));
  check_f32("moe_combine", "y_slots", y_slots, n_tokens * k * n_cols);
  check_f32("moe_combine", "weights", weights, n_tokens * k);
  check_f32("moe_combine", "out", out, n_tokens * n_cols);
  if (y_slots.raw() == out.raw())
    throw Error("backend moe_combine: y_slots and out must not alias");
  moe_combine_impl(y_slots, weights, n_tokens, k, n_cols, out);
}

void Backend::sigmoid_scale_rows(Buffer& x, const Buffer& gate, int64_t n_tokens, int64_t n_cols) {
  check_n_tokens("sigmoid_scale_rows", n_tokens);
  if (n_cols < 1)
    throw Error(fmt::format("backend sigmoid_scale_rows: row length {}, expected >= 1", n_cols));
  check_f32("sigmoid_scale_rows", "x", x, n_tokens * n_cols);
  check_f32("sigmoid_scale_rows", "gate", gate, n_tokens);
  sigmoid_scale_rows_impl(x, gate, n_tokens, n_cols);
}

}  // namespace llmctl
