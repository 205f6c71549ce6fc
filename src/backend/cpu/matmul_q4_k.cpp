// Q4_K weights (144-byte super-blocks of 256: fp16 d, fp16 dmin, 12 bytes of 6-bit scales and
// mins, 128 bytes of nibbles; w = (d*sc_j) * q - dmin*m_j per 32-element sub-block j) against
// int8 activations: the K-quant tile (matmul_kquant_tile.h, trait matmul_q45_k.h), as ggml's
// vec_dot_q4_K_q8_K but with our per-32 activation scales (one fma for the q part, one for the
// min part per block). Also the AVX-512 kernel over the repacked records (weight_repack.h,
// matmul_repacked_tile.h).
#include "backend/cpu/matmul_q45_k.h"
#include "backend/cpu/matmul_repacked_tile.h"
#include "backend/cpu/weight_repack.h"

namespace llmctl::cpu {

namespace {

#if defined(LLMCTL_HAVE_X86)
LLMCTL_AVX512_BEGIN
// The repacked Q4_K record (weight_repack.h: qs vectors at 0, d at 1024, dmin at 1040, scales
// at 1056, mins at 1120).
struct RQ4_K {
  using KQ = KQ45_K<false>;
  static constexpr size_t kRecordBytes = kQ4kRecordBytes;

  // d * sc_j (ds) and dmin * m_j (dm) of the 8 rows: the products KQ's pack computes.
  LLMCTL_AVX512 static void scales(const uint8_t* rec, int j, __m256 d, __m256 dmin, __m256* ds,
                                   __m256* dm) {
    *ds = _mm256_mul_ps(d, _mm256_cvtepi32_ps(rp_u8_lanes(rec + 1056 + 8 * j)));
    *dm = _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(rp_u8_lanes(rec + 1120 + 8 * j)));
  }

  LLMCTL_AVX512 static void unpack(const uint8_t* rec, uint8_t* p) {
    const __m256 d = rp_fp16_lanes(rec + 1024), dmin = rp_fp16_lanes(rec + 1040);
    for (int j = 0; j < 8; ++j) {
      __m256 ds, dm;
      scales(rec, j, d, dmin, &ds, &dm);
      _mm256_storeu_ps(reinterpret_cast<float*>(p + kQ45kDsOffset + 32 * j), ds);
      _mm256_storeu_ps(reinterpret_cast<float*>(p + kQ45kDmOffset + 32 * j), dm);
    }
    const __m256i low = _mm256_set1_epi8(0x0f);
    for (int c = 0; c < 4; ++c)
      for (int s = 0; s < 8; ++s) {
        const __m256i g = kq_load(rec + 32 * (8 * c + s));
        kq_store(p + 256 * (2 * c) + 32 * s, _mm256_and_si256(g, low));
        kq_store(p + 256 * (2 * c + 1) + 32 * s, _mm256_and_si256(_mm256_srli_epi16(g, 4), low));
      }
  }

  LLMCTL_AVX512 static void decode(const uint8_t* rec, const TileArgs& a, int64_t sb, __m256& acc) {
    const __m256 d = rp_fp16_lanes(rec + 1024), dmin = rp_fp16_lanes(rec + 1040);
    const __m256i low = _mm256_set1_epi8(0x0f);
    for (int c = 0; c < 4; ++c) {
      const int64_t b0 = 8 * sb + 2 * c;  // blocks b0 (low nibbles) and b0 + 1 (high)
      const int8_t* x0 = a.qs + 32 * b0;
      __m256i isum[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
      for (int s = 0; s < 8; ++s) {
        const __m256i g = kq_load(rec + 32 * (8 * c + s));
        isum[0] = rp_dot4(isum[0], _mm256_and_si256(g, low), x0 + 4 * s);
        isum[1] = rp_dot4(isum[1], _mm256_and_si256(_mm256_srli_epi16(g, 4), low), x0 + 32 + 4 * s);
      }
      for (int h = 0; h < 2; ++h) {
        const int64_t b = b0 + h;
        __m256 ds, dm;
        scales(rec, 2 * c + h, d, dmin, &ds, &dm);
        const float dx = a.qd[b];
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[h]), _mm256_mul_ps(ds, _mm256_set1_ps(dx)),
                              acc);
        acc = _mm256_fnmadd_ps(_mm256_set1_ps(static_cast<float>(a.qsum[b]) * dx), dm, acc);
      }
    }
  }
};
LLMCTL_AVX512_END
#endif

}  // namespace

MatmulKernel matmul_kernel_q4_k(bool avx2) {
  return make_kquant_kernel<KQ45_K<false>>(avx2, "q4_k avx2", "q4_k scalar");
}

MatmulKernel matmul_kernel_q4_k_avx512() {
  return make_paired_kernel_avx512<KQuantUnit, KQ45_K<false>>("q4_k avx512-vnni (decode avx2)");
}

MatmulKernel matmul_kernel_q4_k_repacked() {
#if defined(LLMCTL_HAVE_X86)
  return make_repacked_kernel_avx512<RQ4_K>("q4_k avx512-vnni repacked-x8");
#else
  return MatmulKernel{};
#endif
}

}  // namespace llmctl::cpu
