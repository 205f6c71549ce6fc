// The mixture-of-experts ops of the CPU reference backend (backend.h "mixture of experts"):
// plain loops, which the threaded backend inherits (next to an expert's matmuls they cost
// nothing worth a fast path).
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "core/softmax.h"

namespace llmctl::cpu {

namespace {

size_t to_size(int64_t n) { return static_cast<size_t>(n); }

// Whether expert a ranks before expert b: the larger probability, NaN last, ties by index.
bool ranks_before(const float* p, int32_t a, int32_t b) {
  const bool na = std::isnan(p[a]), nb = std::isnan(p[b]);
  if (na != nb) return nb;
  if (!na && p[a] != p[b]) return p[a] > p[b];
  return a < b;
}

}  // namespace

void CpuBackend::moe_route_impl(const Buffer& logits, int64_t n_tokens, int64_t n_expert,
                                int64_t k, bool normalize, Buffer& ids, Buffer& weights) {
  std::vector<float> p(to_size(n_expert));
  std::vector<int32_t> order(to_size(n_expert));
  for (int64_t t = 0; t < n_tokens; ++t) {
    std::memcpy(p.data(), logits.data() + t * n_expert, to_size(n_expert) * sizeof(float));
    softmax_inplace(p.data(), n_expert);
    std::iota(order.begin(), order.end(), 0);
    // Selection of the k best by repeated scans: k is small (2 to 8) and the order is total.
    for (int64_t r = 0; r < k; ++r) {
      auto best = static_cast<size_t>(r);
      for (auto j = best + 1; j < order.size(); ++j)
        if (ranks_before(p.data(), order[j], order[best])) best = j;
      std::swap(order[static_cast<size_t>(r)], order[best]);
    }
    int32_t* id = ids.i32() + t * k;
    float* w = weights.data() + t * k;
    float sum = 0.0f;
    for (int64_t r = 0; r < k; ++r) {
      id[r] = order[to_size(r)];
      w[r] = p[to_size(id[r])];
      sum += w[r];
    }
    if (normalize) {
      const float d = std::max(sum, 6.103515625e-5f);  // llama.cpp's clamp of the sum
      for (int64_t r = 0; r < k; ++r) w[r] /= d;
    }
  }
}

void CpuBackend::moe_gather_impl(const Buffer& x, int64_t n_cols, const Buffer& slots,
                                 int64_t offset, int64_t m, int64_t k, Buffer& out) {
  const int64_t x_rows = x.size() / n_cols;
  for (int64_t i = 0; i < m; ++i) {
    const int64_t row = slots.i32()[offset + i] / k;
    if (slots.i32()[offset + i] < 0 || row >= x_rows)
      throw Error(fmt::format("backend moe_gather: slot {} is token {}, outside [0, {})",
                              slots.i32()[offset + i], row, x_rows));
    std::memcpy(out.data() + i * n_cols, x.data() + row * n_cols, to_size(n_cols) * sizeof(float));
  }
}

void CpuBackend::moe_scatter_impl(const Buffer& y, int64_t n_cols, const Buffer& slots,
                                  int64_t offset, int64_t m, Buffer& y_slots) {
  const int64_t n_slots = y_slots.size() / n_cols;
  for (int64_t i = 0; i < m; ++i) {
    const int32_t s = slots.i32()[offset + i];
    if (s < 0 || s >= n_slots)
      throw Error(fmt::format("backend moe_scatter: slot {} is outside [0, {})", s, n_slots));
    std::memcpy(y_slots.data() + int64_t{s} * n_cols, y.data() + i * n_cols,
                to_size(n_cols) * sizeof(float));
  }
}

void CpuBackend::moe_combine_impl(const Buffer& y_slots, const Buffer& weights, int64_t n_tokens,
                                  int64_t k, int64_t n_cols, Buffer& out) {
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* w = weights.data() + t * k;
    float* o = out.data() + t * n_cols;
    const float* y0 = y_slots.data() + t * k * n_cols;
    for (int64_t c = 0; c < n_cols; ++c) o[c] = w[0] * y0[c];
    for (int64_t r = 1; r < k; ++r) {
      const float* y = y0 + r * n_cols;
      for (int64_t c = 0; c < n_cols; ++c) {
        const float prod = w[r] * y[c];  // rounded on its own: the contract forbids a fused add
        o[c] += prod;
      }
    }
  }
}

void CpuBackend::sigmoid_scale_rows_impl(Buffer& x, const Buffer& gate, int64_t n_tokens,
                                         int64_t n_cols) {
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float s = 1.0f / (1.0f + std::exp(-gate.data()[t]));
    float* row = x.data() + t * n_cols;
    for (int64_t c = 0; c < n_cols; ++c) row[c] *= s;
  }
}

}  // namespace llmctl::cpu
