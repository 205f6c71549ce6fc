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
//
// YaRN (Peng et al. 2023; llama.cpp's rope_yarn, transformers' _compute_yarn_parameters): pair i
// interpolates (theta * freq_scale) where its wavelength is long and extrapolates (theta, as
// trained) where it is short, with a linear ramp between the correction pairs [low, high]:
//   r_i = (1 - clamp((i - low) / max(0.001, high - low), 0, 1)) * ext_factor
//   theta_i = theta_interp * (1 - r_i) + theta_extrap * r_i
// and cos/sin are multiplied by mscale (the "attention factor", 1 + 0.1 ln(factor) by default).
// ext_factor 0 and mscale 1 leave every angle and product exactly as without YaRN.

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

// YaRN's correction pair of a rotation count: the pair whose wavelength turns `n_turns` times in
// n_ctx_orig positions, n_rot * ln(n_ctx_orig / (n_turns 2 pi)) / (2 ln base).
inline double rope_yarn_corr_pair(int64_t n_rot, int64_t n_ctx_orig, double n_turns, double base) {
  constexpr double kTwoPi = 6.283185307179586;
  return static_cast<double>(n_rot) *
         std::log(static_cast<double>(n_ctx_orig) / (n_turns * kTwoPi)) / (2.0 * std::log(base));
}

// [low, high] from beta_fast (32) and beta_slow (1): floor and ceil, clamped to the pairs.
inline void rope_yarn_corr_range(int64_t n_rot, int64_t n_ctx_orig, double base, double beta_fast,
                                 double beta_slow, double* low, double* high) {
  const double lo = std::floor(rope_yarn_corr_pair(n_rot, n_ctx_orig, beta_fast, base));
  const double hi = std::ceil(rope_yarn_corr_pair(n_rot, n_ctx_orig, beta_slow, base));
  *low = lo > 0.0 ? lo : 0.0;
  *high = hi < static_cast<double>(n_rot - 1) ? hi : static_cast<double>(n_rot - 1);
}

// The angle of pair i under YaRN, from its extrapolated (trained) angle; ext_factor != 0.
inline double rope_yarn_theta(double theta_extrap, int64_t pair, double freq_scale,
                              double ext_factor, double low, double high) {
  const double span = high - low > 0.001 ? high - low : 0.001;
  double y = (static_cast<double>(pair) - low) / span;
  y = y < 0.0 ? 0.0 : (y > 1.0 ? 1.0 : y);
  const double mix = (1.0 - y) * ext_factor;
  return freq_scale * theta_extrap * (1.0 - mix) + theta_extrap * mix;
}

// The angle every backend rotates pair i by: rope_theta divided by the pair's frequency factor
// (Llama 3.1's rope_freqs, Phi-3's long/short factors; 1 without), YaRN-mixed when ext_factor is
// not 0. Without YaRN the arithmetic is exactly rope_theta(...) / factor.
inline double rope_angle(int64_t pos, int64_t pair, int64_t n_rot, double freq_base,
                         double freq_scale, double factor, double ext_factor, double low,
                         double high) {
  if (ext_factor == 0.0) return rope_theta(pos, pair, n_rot, freq_base, freq_scale) / factor;
  const double extrap = rope_theta(pos, pair, n_rot, freq_base, 1.0) / factor;
  return rope_yarn_theta(extrap, pair, freq_scale, ext_factor, low, high);
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

// Attention temperature (Llama 4's, Mistral 3's): q at position p is multiplied after RoPE by
//   1 + beta * ln(1 + floor(p / length))
// which is exactly 1 below `length` (the original context) and grows by steps past it. As
// llama.cpp's llm_graph_input_attn_temp (offset 0 for mistral3) and transformers'
// get_llama_4_attn_scale: the factor in double, rounded to float once; the floor of an integer
// division (positions are integers; a negative position, which no cache holds, gets 1).
// length >= 1.
inline float attn_temperature(int64_t pos, double beta, int64_t length) {
  if (pos < length) return 1.0f;
  return static_cast<float>(1.0 + beta * std::log(1.0 + static_cast<double>(pos / length)));
}

}  // namespace llmctl
