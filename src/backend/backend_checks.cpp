// The backend seam's shared argument checks (backend_checks.h).
#include "backend/backend_checks.h"

#include <fmt/format.h>

#include "core/error.h"

namespace llmctl::backend_checks {

void check_buffer(const char* op, const char* what, const Buffer& b, BufferType type,
                  int64_t needed) {
  if (b.raw() == nullptr) throw Error(fmt::format("backend {}: {} is an empty buffer", op, what));
  if (b.type() != type)
    throw Error(fmt::format("backend {}: {} is {}, expected {}", op, what,
                            buffer_type_name(b.type()), buffer_type_name(type)));
  if (b.size() < needed)
    throw Error(fmt::format("backend {}: {} has {} elements, expected at least {}", op, what,
                            b.size(), needed));
}

void check_f32(const char* op, const char* what, const Buffer& b, int64_t needed) {
  check_buffer(op, what, b, BufferType::F32, needed);
}

void check_i32(const char* op, const char* what, const Buffer& b, int64_t needed) {
  check_buffer(op, what, b, BufferType::I32, needed);
}

void check_n_tokens(const char* op, int64_t n_tokens) {
  if (n_tokens < 1)
    throw Error(fmt::format("backend {}: n_tokens {}, expected at least 1", op, n_tokens));
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
                    "BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, "
                    "IQ4_NL, IQ4_XS, MXFP4",
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

}  // namespace llmctl::backend_checks
