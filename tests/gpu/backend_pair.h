#pragma once
// Helpers for the tests that run one op on the CUDA backend and on the CPU reference backend
// (the oracle) and compare: host <-> backend copies, random data, weights bound to both.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "core/ggml_type.h"
#include "quant/dequant.h"
#include "quant/quantize.h"

namespace llmctl::test {

inline std::vector<float> random_floats(size_t n, uint64_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

inline Buffer make_f32(Backend& b, const std::vector<float>& host) {
  Buffer buf = b.alloc(static_cast<int64_t>(host.size()));
  b.upload(buf, host.data(), static_cast<int64_t>(host.size()));
  return buf;
}

inline Buffer make_i32(Backend& b, const std::vector<int32_t>& host) {
  Buffer buf = b.alloc(static_cast<int64_t>(host.size()), BufferType::I32);
  b.upload(buf, host.data(), static_cast<int64_t>(host.size()));
  return buf;
}

inline std::vector<float> fetch(Backend& b, const Buffer& buf, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  b.download(buf, v.data(), n);
  return v;
}

inline std::vector<int32_t> fetch_i32(Backend& b, const Buffer& buf, int64_t n) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  b.download(buf, v.data(), n);
  return v;
}

// A weight (n_rows, n_cols) of `type` made by quantizing uniform [-1, 1) values: its host bytes,
// the view the CPU reads, the view bound to the GPU, and the dequantized values (n_rows * n_cols).
struct PairedWeight {
  std::vector<uint8_t> bytes;
  WeightView host, gpu;
  std::vector<float> values;
};

inline PairedWeight make_weight(cuda::CudaBackend& gpu, GgmlType type, int64_t n_rows,
                                int64_t n_cols, uint64_t seed, const std::string& name = "w") {
  PairedWeight w;
  const std::vector<float> src = random_floats(static_cast<size_t>(n_rows * n_cols), seed);
  const size_t row_bytes = weight_row_bytes(type, n_cols);
  w.bytes.resize(row_bytes * static_cast<size_t>(n_rows));
  w.values.resize(src.size());
  for (int64_t r = 0; r < n_rows; ++r) {
    uint8_t* row = w.bytes.data() + static_cast<size_t>(r) * row_bytes;
    quantize_row(type, src.data() + r * n_cols, row, n_cols);
    dequantize_row(type, row, w.values.data() + r * n_cols, n_cols);
  }
  w.host = WeightView{name, type, n_cols, n_rows, w.bytes.data()};
  w.gpu = gpu.bind_weight(w.host);
  return w;
}

// Largest |a[i] - b[i]|; NaN when either side has a NaN.
inline double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0.0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i]));
    if (std::isnan(d)) return d;
    worst = std::max(worst, d);
  }
  return worst;
}

// Bit-for-bit equality (NaN payloads included), for results that must be identical.
inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Row lengths around the warp (32) and block (256) sizes, for ops without a block-size rule.
inline const std::vector<int64_t>& odd_lengths() {
  static const std::vector<int64_t> v{1, 7, 31, 33, 100, 255, 257, 1000, 4097};
  return v;
}

}  // namespace llmctl::test
