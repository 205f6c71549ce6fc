// The activations of a prepared matmul (matmul_prepared.h): int8 blocks with their sums, f16
// halves or f16-rounded f32, converted once per call (and once per format for
// matmul_fast_shared) before the tiles run.
#include <algorithm>

#include "backend/cpu/matmul_prepared.h"
#include "backend/cpu/quantize_activations.h"

namespace llmctl::cpu {

namespace {

// fn(t0, t1) over the tokens [0, n_tokens): on the caller for one token (decode: waking the
// pool costs more than the work) or a one-thread pool, else split over the pool.
template <class Fn>
void for_tokens(ThreadPool& pool, int64_t n_tokens, const Fn& fn) {
  if (n_tokens == 1 || pool.size() == 1)
    fn(int64_t{0}, n_tokens);
  else
    pool.parallel_for(n_tokens, [&](int64_t t0, int64_t t1, int) { fn(t0, t1); });
}

void quantize_tokens(const MatmulKernel& k, bool avx2, const float* x, int64_t n, int64_t t0,
                     int64_t t1, MatmulScratch& s) {
  const int64_t nb = n / 32;
  for (int64_t t = t0; t < t1; ++t) {
    const size_t q = static_cast<size_t>(t * n), b = static_cast<size_t>(t * nb);
    if (avx2)
      quantize_activations_avx2(x + t * n, n, s.qs.data() + q, s.d.data() + b, k.activation_group);
    else
      quantize_activations_scalar(x + t * n, n, s.qs.data() + q, s.d.data() + b,
                                  k.activation_group);
    int32_t* halves = k.half_sums ? s.half.data() + b : nullptr;
    if (avx2) {
      activation_sums_avx2(s.qs.data() + q, n, s.sum.data() + b, halves);
    } else {
      activation_block_sums(s.qs.data() + q, n, s.sum.data() + b);
      if (halves != nullptr) activation_half_sums(s.qs.data() + q, n, halves);
    }
    if (k.pair_sums) activation_pair_sums(s.sum.data() + b, n, s.pair.data() + b / 2);
    for (size_t i = b; i < b + static_cast<size_t>(nb); ++i) {
      if (k.sum_offset != 0) s.off[i] = -k.sum_offset * s.sum[i];
      if (k.sum_scaled) s.sumd[i] = static_cast<float>(s.sum[i]) * s.d[i];
    }
  }
}

void half_tokens(bool avx2, const float* x, int64_t n, int64_t t0, int64_t t1, MatmulScratch& s) {
  for (int64_t t = t0; t < t1; ++t) {
    uint16_t* xh = s.xh.data() + t * n;
    const bool fits = avx2 ? activations_to_f16_avx2(x + t * n, n, xh)
                           : activations_to_f16_scalar(x + t * n, n, xh);
    s.fits[static_cast<size_t>(t)] = fits ? 1 : 0;
  }
}

void rounded_tokens(bool avx2, const float* x, int64_t n, int64_t t0, int64_t t1,
                    MatmulScratch& s) {
  for (int64_t t = t0; t < t1; ++t) {
    float* xr = s.xr.data() + t * n;
    if (avx2)
      activations_round_f16_avx2(x + t * n, n, xr);
    else
      activations_round_f16_scalar(x + t * n, n, xr);
  }
}

template <class T>
void grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

}  // namespace

bool same_activations(const MatmulKernel& a, const MatmulKernel& b) {
  if (a.quantized != b.quantized) return false;
  if (a.quantized)  // the extra per-block arrays: each kernel's own, or none
    return a.activation_group == b.activation_group && a.half_sums == b.half_sums &&
           a.pair_sums == b.pair_sums && a.sum_offset == b.sum_offset &&
           a.sum_scaled == b.sum_scaled;
  return a.half_activations == b.half_activations && a.halves_widened == b.halves_widened;
}

void share_activations(PreparedMatmul& p, const PreparedMatmul& like) {
  const TileArgs& s = like.base;
  p.base.x = s.x;
  p.base.xh = s.xh;
  p.base.qs = s.qs;
  p.base.qd = s.qd;
  p.base.qsum = s.qsum;
  p.base.qhalf = s.qhalf;
  p.base.qpair = s.qpair;
  p.base.qoff = s.qoff;
  p.base.qsumd = s.qsumd;
  p.fits = like.fits;
  if (p.k.half_activations && p.k.halves_widened) {  // as prepare_activations switches it
    p.k.tile = p.k.tile_wide;
    p.k.half_activations = false;
  }
}

void prepare_activations(PreparedMatmul& p, bool avx2, const float* x, int64_t n_tokens,
                         ThreadPool& pool, MatmulScratch& scratch) {
  MatmulKernel& k = p.k;
  const int64_t n = p.base.n;
  p.base.x = x;
  p.fits = nullptr;
  if (k.quantized) {
    const size_t n_q = static_cast<size_t>(n_tokens * n), n_b = n_q / 32;
    grow(scratch.qs, n_q);
    grow(scratch.d, n_b);
    grow(scratch.sum, n_b);
    if (k.half_sums) grow(scratch.half, n_b);
    if (k.pair_sums) grow(scratch.pair, n_b / 2);
    if (k.sum_offset != 0) grow(scratch.off, n_b);
    if (k.sum_scaled) grow(scratch.sumd, n_b);
    for_tokens(pool, n_tokens,
               [&](int64_t t0, int64_t t1) { quantize_tokens(k, avx2, x, n, t0, t1, scratch); });
    p.base.qs = scratch.qs.data();
    p.base.qd = scratch.d.data();
    p.base.qsum = scratch.sum.data();
    if (k.half_sums) p.base.qhalf = scratch.half.data();
    if (k.pair_sums) p.base.qpair = scratch.pair.data();
    if (k.sum_offset != 0) p.base.qoff = scratch.off.data();
    if (k.sum_scaled) p.base.qsumd = scratch.sumd.data();
  }
  if (k.half_activations && k.halves_widened) {
    // every token through tile_wide, over its f16-rounded values (or its own, if they overflow)
    grow(scratch.xr, static_cast<size_t>(n_tokens * n));
    for_tokens(pool, n_tokens,
               [&](int64_t t0, int64_t t1) { rounded_tokens(avx2, x, n, t0, t1, scratch); });
    p.base.x = scratch.xr.data();
    k.tile = k.tile_wide;
    k.half_activations = false;
  }
  if (k.half_activations) {
    grow(scratch.xh, static_cast<size_t>(n_tokens * n));
    grow(scratch.fits, static_cast<size_t>(n_tokens));
    for_tokens(pool, n_tokens,
               [&](int64_t t0, int64_t t1) { half_tokens(avx2, x, n, t0, t1, scratch); });
    p.base.xh = scratch.xh.data();
    // Per-token fit flags only when some token does not fit f16 (the rare case).
    if (!std::all_of(scratch.fits.begin(), scratch.fits.begin() + n_tokens,
                     [](uint8_t f) { return f; }))
      p.fits = scratch.fits.data();
  }
}

}  // namespace llmctl::cpu
