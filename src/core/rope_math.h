#pragma once
// RoPE per-element math shared by every backend (plain inline C++ so a CUDA kernel can mark it
// __host__ __device__ later and the CPU tests exercise the same code).
//
// A head vector x (head_dim,) is rotated in pairs. For pair i (0 <= i < n_rot / 2) at
// position p:
//   theta = p * freq_scale * base^(-2i / n_rot)
//   (x0, x1) <- (x0 cos theta - x1 sin theta, x0 sin theta + x1 cos theta)
// Which elements form pair i depends on the rope type (llama.cpp's naming):
//   Normal (LLAMA_ROPE_TYPE_NORM, arch llama): x0 = x[2i], x1 = x[2i + 1]
//   Neox   (LLAMA_ROPE_TYPE_NEOX, arch qwen2): x0 = x[i],  x1 = x[i + n_rot / 2]
// Elements at n_rot .. head_dim - 1 are left as they are (partial rotary).
// freq_scale = 1 / factor implements linear rope scaling; 1 without scaling.

#include <cmath>
#include <cstdint>

namespace llmctl {

enum class RopeType { Normal, Neox };

// Angle for position p and pair i. Computed in double and rounded once: the angle grows
// with p (thousands of radians at long context), and a float product would lose the phase.
inline double rope_theta(int64_t pos, int64_t pair, int64_t n_rot, double freq_base,
                         double freq_scale) {
  const double exponent = -2.0 * static_cast<double>(pair) / static_cast<double>(n_rot);
  return static_cast<double>(pos) * freq_scale * std::pow(freq_base, exponent);
}

// Indices (within a head) of the two elements of pair i.
inline void rope_pair_index(RopeType type, int64_t pair, int64_t n_rot, int64_t* i0, int64_t* i1) {
  if (type == RopeType::Normal) {
    *i0 = 2 * pair;
    *i1 = 2 * pair + 1;
  } else {
    *i0 = pair;
    *i1 = pair + n_rot / 2;
  }
}

// Rotates one pair in place by theta.
// The rotation with cos/sin already rounded to float (shared by every head at a position).
inline void rope_rotate_cs(float* x0, float* x1, float c, float s) {
  const float a = *x0;
  const float b = *x1;
  *x0 = a * c - b * s;
  *x1 = a * s + b * c;
}

inline void rope_rotate(float* x0, float* x1, double theta) {
  rope_rotate_cs(x0, x1, static_cast<float>(std::cos(theta)), static_cast<float>(std::sin(theta)));
}

}  // namespace llmctl
