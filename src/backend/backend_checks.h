#pragma once
// Internal to the backend seam (backend.cpp, backend_moe.cpp): the argument checks every
// backend's public ops share. Each failure names the op and says what was expected and what was
// found.
#include <cstdint>

#include "backend/backend.h"

namespace llmctl::backend_checks {

// `b` holds at least `needed` elements of `type` (buffers are sized for the largest batch).
void check_buffer(const char* op, const char* what, const Buffer& b, BufferType type,
                  int64_t needed);
void check_f32(const char* op, const char* what, const Buffer& b, int64_t needed);
void check_i32(const char* op, const char* what, const Buffer& b, int64_t needed);
void check_n_tokens(const char* op, int64_t n_tokens);
// A weight with data and a positive shape.
void check_weight_data(const char* op, const WeightView& w);
// check_weight_data, of an engine type, its rows whole blocks (matmul, get_rows).
void check_quantizable_weight(const char* op, const WeightView& w);
// An F32 vector of n values (norm weights, biases).
void check_f32_vector(const char* op, const WeightView& w, int64_t n);

}  // namespace llmctl::backend_checks
