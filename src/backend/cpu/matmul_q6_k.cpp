// Q6_K weights (210-byte super-blocks of 256: 128 bytes of low nibbles ql, 64 bytes of 2-bit
// highs qh, 16 int8 scales, fp16 d; w = (d*sc_s) * (q - 32) per 16-element sub-block s) against
// int8 activations: the K-quant tile (matmul_kquant_tile.h), as ggml's vec_dot_q6_K_q8_K but
// with our per-32 activation scales: the two sub-blocks of an activation block fold into one
// exact integer sum, then one fma per block. Also the AVX-512 kernel over the repacked records
// (weight_repack.h, matmul_repacked_tile.h).
#include "backend/cpu/matmul_paired_tile_avx512.h"
#include "backend/cpu/matmul_repacked_tile.h"
#include "backend/cpu/weight_repack.h"

namespace llmctl::cpu {

namespace {

struct KQ6_K {
  static constexpr size_t kBytes = 210;
  static constexpr int kTokens = 6;

  static float scalar_block(const uint8_t* sb, int j, const int8_t* qx, float dx, int32_t xsum,
                            float acc) {
    (void)xsum;
    int8_t sc[2];
    std::memcpy(sc, sb + 192 + 2 * j, 2);
    int half[2] = {0, 0};
    for (int l = 0; l < 32; ++l) half[l / 16] += (q6_k_value(sb, 32 * j + l) - 32) * qx[l];
    const int isum = sc[0] * half[0] + sc[1] * half[1];
    return std::fma(static_cast<float>(isum), fp16_to_f32(load_u16_le(sb + 208)) * dx, acc);
  }

#if defined(LLMCTL_HAVE_X86)
  // Panel record (8 rows, one super-block):
  //   w[8][8]  at 256 j + 32 s: block j, weights 4s..4s+3 of rows 0..7, q in 0..63 (unsigned)
  //   sa[8]    at 2048 + 32 j: per row the int16 pair (sc_2j, sc_2j), sb[8] at 2304: sc_2j+1
  //   off[8]   at 2560 + 32 j: per row the int16 pair (-32 sc_2j, -32 sc_2j+1)
  //   d        at 2816: 8 floats
  static constexpr size_t kSaOffset = 2048, kSbOffset = 2304, kOffOffset = 2560, kDOffset = 2816;
  static constexpr size_t kPanelBytes = 2848;

  // The 8 rows' block against 32 activations, without the -32: sum_s sc * q * x. A maddubs
  // lane is <= 2 * 63 * 127 = 16002 in magnitude, so two steps add in int16 (<= 32004)
  // before a madd with the sub-block's scale widens them (the scales differ every 4 steps).
  LLMCTL_AVX2 static __m256i dot(const uint8_t* w, const int8_t* qx, __m256i sa, __m256i sb) {
    __m256i sum = _mm256_setzero_si256();
    for (int s = 0; s < 8; s += 2) {
      const __m256i p = _mm256_add_epi16(
          _mm256_maddubs_epi16(kq_load(w + 32 * s), kq_bcast4(qx + 4 * s)),
          _mm256_maddubs_epi16(kq_load(w + 32 * s + 32), kq_bcast4(qx + 4 * s + 4)));
      sum = _mm256_add_epi32(sum, _mm256_madd_epi16(p, s < 4 ? sa : sb));
    }
    return sum;
  }

  // Per block of the super-block: (sum of activations 0..15) | (sum of 16..31) << 16, int16
  // each (|sum| <= 16 * 127), the operand of the -32 term's madd with off[j].
  LLMCTL_AVX2 static void half_sums(const int8_t* qx, int32_t out[8]) {
    const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    __m256i m[8];
    for (int i = 0; i < 8; ++i)
      m[i] = _mm256_madd_epi16(
          _mm256_maddubs_epi16(ones8, kq_load(reinterpret_cast<const uint8_t*>(qx) + 32 * i)),
          ones16);  // lanes 0..3: parts of block i's first half, 4..7: its second half
    // hadd twice: low 128 bits the first halves of 4 blocks, high 128 bits their second halves
    const __m256i lo =
        _mm256_hadd_epi32(_mm256_hadd_epi32(m[0], m[1]), _mm256_hadd_epi32(m[2], m[3]));
    const __m256i hi =
        _mm256_hadd_epi32(_mm256_hadd_epi32(m[4], m[5]), _mm256_hadd_epi32(m[6], m[7]));
    const __m256i first = _mm256_permute2x128_si256(lo, hi, 0x20);
    const __m256i second = _mm256_permute2x128_si256(lo, hi, 0x31);
    const __m256i pairs = _mm256_blend_epi16(first, _mm256_slli_epi32(second, 16), 0xaa);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), pairs);
  }

  LLMCTL_AVX2 static void pack(const uint8_t* const rows[8], size_t off, uint8_t* p) {
    __m256i g[4];  // g[c] lane r: scales 4c..4c+3 of row r
    kq_transpose16(rows, off + 192, g);
    const __m256i low16 = _mm256_set1_epi32(0xffff);
    for (int j = 0; j < 8; ++j) {
      const int sh = 16 * (j % 2);  // scales 2j, 2j+1: bytes sh/8, sh/8 + 1 of dword j/2
      const __m256i sa =
          _mm256_srai_epi32(_mm256_sll_epi32(g[j / 2], _mm_cvtsi32_si128(24 - sh)), 24);
      const __m256i sb =
          _mm256_srai_epi32(_mm256_sll_epi32(g[j / 2], _mm_cvtsi32_si128(16 - sh)), 24);
      kq_store(p + kSaOffset + 32 * j,
               _mm256_or_si256(_mm256_and_si256(sa, low16), _mm256_slli_epi32(sa, 16)));
      kq_store(p + kSbOffset + 32 * j,
               _mm256_or_si256(_mm256_and_si256(sb, low16), _mm256_slli_epi32(sb, 16)));
      const __m256i na = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(sa, 5));
      const __m256i nb = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(sb, 5));
      kq_store(p + kOffOffset + 32 * j, _mm256_blend_epi16(na, _mm256_slli_epi32(nb, 16), 0xaa));
    }
    __m256i gd[4];  // bytes 194..209: d is the high half of dword 3
    kq_transpose16(rows, off + 194, gd);
    _mm256_storeu_ps(reinterpret_cast<float*>(p + kDOffset), kq_fp16_lanes(gd[3], true));
    const __m256i nib = _mm256_set1_epi8(0x0f), top = _mm256_set1_epi8(0x30);
    for (int h = 0; h < 2; ++h) {  // elements 128h + 32k + l: block 4h + k
      __m256i l0[8], l1[8], hb[8];
      kq_transpose32(rows, off + 64 * static_cast<size_t>(h), l0);
      kq_transpose32(rows, off + 64 * static_cast<size_t>(h) + 32, l1);
      kq_transpose32(rows, off + 128 + 32 * static_cast<size_t>(h), hb);
      for (int k = 0; k < 4; ++k)
        for (int s = 0; s < 8; ++s) {
          const __m256i src = k % 2 == 0 ? l0[s] : l1[s];
          const __m256i lo = _mm256_and_si256(k < 2 ? src : _mm256_srli_epi16(src, 4), nib);
          // bits 2k, 2k+1 of qh to bits 4, 5 (the 16-bit shifts keep them inside their byte)
          const __m256i hi =
              _mm256_and_si256(k < 3 ? _mm256_sll_epi16(hb[s], _mm_cvtsi32_si128(4 - 2 * k))
                                     : _mm256_srli_epi16(hb[s], 2),
                               top);
          kq_store(p + 256 * (4 * h + k) + 32 * s, _mm256_or_si256(lo, hi));
        }
    }
  }

  template <int T>
  LLMCTL_AVX2 static void superblock(const uint8_t* p, const TileArgs& a, int64_t sbi,
                                     __m256* acc) {
    const int64_t nb = a.n / 32;
    alignas(32) int32_t xh[static_cast<size_t>(T)][8];
    for (int t = 0; t < T; ++t) half_sums(a.qs + t * a.n + kKQuantSuperBlock * sbi, xh[t]);
    const __m256 d = _mm256_loadu_ps(reinterpret_cast<const float*>(p + kDOffset));
    for (int j = 0; j < 8; ++j) {
      const int64_t b = 8 * sbi + j;
      const __m256i sa = kq_load(p + kSaOffset + 32 * j), sb = kq_load(p + kSbOffset + 32 * j);
      const __m256i offs = kq_load(p + kOffOffset + 32 * j);
      for (int t = 0; t < T; ++t) {
        const __m256i isum = _mm256_add_epi32(dot(p + 256 * j, a.qs + t * a.n + 32 * b, sa, sb),
                                              _mm256_madd_epi16(_mm256_set1_epi32(xh[t][j]), offs));
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum),
                                 _mm256_mul_ps(d, _mm256_set1_ps(a.qd[t * nb + b])), acc[t]);
      }
    }
  }

  // The same over a 16-row panel record (matmul_paired_tile_avx512.h: every offset doubled):
  // vpdpbusd sums of each 16-element half, times its scale in int32 (|half sum| <= 16 * 63 *
  // 127, times |sc| <= 128: far inside int32), plus the -32 term as in the AVX2 tile.
  template <int T>
  LLMCTL_AVX512 static void superblock512(const uint8_t* p, const TileArgs& a, int64_t sbi,
                                          __m512* acc) {
    const int64_t nb = a.n / 32;
    alignas(32) int32_t xh[static_cast<size_t>(T)][8];
    for (int t = 0; t < T; ++t) half_sums(a.qs + t * a.n + kKQuantSuperBlock * sbi, xh[t]);
    const __m512 d = _mm512_loadu_ps(p + 2 * kDOffset);
    for (int j = 0; j < 8; ++j) {
      const int64_t b = 8 * sbi + j;
      const uint8_t* w = p + 512 * j;
      const int8_t* qx = a.qs + 32 * b;
      // the int16 pairs (sc, sc): the high half, sign-extended, is sc
      const __m512i sa = _mm512_srai_epi32(_mm512_loadu_si512(p + 2 * kSaOffset + 64 * j), 16);
      const __m512i sb = _mm512_srai_epi32(_mm512_loadu_si512(p + 2 * kSbOffset + 64 * j), 16);
      const __m512i offs = _mm512_loadu_si512(p + 2 * kOffOffset + 64 * j);
      __m512i isum[static_cast<size_t>(T)], part[static_cast<size_t>(T)];
      dots_u8_512<T>(w, qx, a.n, 0, 4, part);
      for (int t = 0; t < T; ++t)
        isum[t] = _mm512_add_epi32(_mm512_mullo_epi32(part[t], sa),
                                   _mm512_madd_epi16(_mm512_set1_epi32(xh[t][j]), offs));
      dots_u8_512<T>(w, qx, a.n, 4, 8, part);
      for (int t = 0; t < T; ++t) {
        isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(part[t], sb));
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]),
                                 _mm512_mul_ps(d, _mm512_set1_ps(a.qd[t * nb + b])), acc[t]);
      }
    }
  }
#endif
};

#if defined(LLMCTL_HAVE_X86)
LLMCTL_AVX512_BEGIN
// The repacked Q6_K record (weight_repack.h: ql vectors at 0, qh vectors at 1024, int8 scales at
// 1536, d at 1664). Block j = 4 h + k of the super-block takes its low nibbles from ql vector
// row 2 h + k % 2 (k >= 2: the high nibbles) and bits 2 k, 2 k + 1 of qh vector row h.
struct RQ6_K {
  using KQ = KQ6_K;
  static constexpr size_t kRecordBytes = kQ6kRecordBytes;

  // Step s of block 4 h + k for k = 0..3: w[k], q in 0..63 (KQ6_K::pack's values).
  LLMCTL_AVX512 static void weights(const uint8_t* rec, int h, int s, __m256i w[4]) {
    const __m256i nib = _mm256_set1_epi8(0x0f), top = _mm256_set1_epi8(0x30);
    const __m256i l0 = kq_load(rec + 32 * (8 * (2 * h) + s));
    const __m256i l1 = kq_load(rec + 32 * (8 * (2 * h + 1) + s));
    const __m256i hb = kq_load(rec + 1024 + 32 * (8 * h + s));
    w[0] =
        _mm256_or_si256(_mm256_and_si256(l0, nib), _mm256_and_si256(_mm256_slli_epi16(hb, 4), top));
    w[1] =
        _mm256_or_si256(_mm256_and_si256(l1, nib), _mm256_and_si256(_mm256_slli_epi16(hb, 2), top));
    w[2] =
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), nib), _mm256_and_si256(hb, top));
    w[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), nib),
                           _mm256_and_si256(_mm256_srli_epi16(hb, 2), top));
  }

  LLMCTL_AVX512 static void unpack(const uint8_t* rec, uint8_t* p) {
    const __m256i low16 = _mm256_set1_epi32(0xffff);
    for (int j = 0; j < 8; ++j) {  // KQ6_K::pack's sa, sb and off from the int8 scales
      const __m256i sa = rp_i8_lanes(rec + 1536 + 8 * (2 * j));
      const __m256i sb = rp_i8_lanes(rec + 1536 + 8 * (2 * j + 1));
      kq_store(p + KQ::kSaOffset + 32 * j,
               _mm256_or_si256(_mm256_and_si256(sa, low16), _mm256_slli_epi32(sa, 16)));
      kq_store(p + KQ::kSbOffset + 32 * j,
               _mm256_or_si256(_mm256_and_si256(sb, low16), _mm256_slli_epi32(sb, 16)));
      const __m256i na = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(sa, 5));
      const __m256i nb = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(sb, 5));
      kq_store(p + KQ::kOffOffset + 32 * j,
               _mm256_blend_epi16(na, _mm256_slli_epi32(nb, 16), 0xaa));
    }
    _mm256_storeu_ps(reinterpret_cast<float*>(p + KQ::kDOffset), rp_fp16_lanes(rec + 1664));
    for (int h = 0; h < 2; ++h)
      for (int s = 0; s < 8; ++s) {
        __m256i w[4];
        weights(rec, h, s, w);
        for (int k = 0; k < 4; ++k) kq_store(p + 256 * (4 * h + k) + 32 * s, w[k]);
      }
  }

  // isum = sc_2j * (sum_{l<16} q x - 32 xa) + sc_2j+1 * (sum_{l>=16} q x - 32 xb), xa and xb the
  // halves' activation sums: the same integer as KQ6_K::superblock's.
  LLMCTL_AVX512 static void decode(const uint8_t* rec, const TileArgs& a, int64_t sb, __m256& acc) {
    alignas(32) int32_t xh[8];
    KQ::half_sums(a.qs + kKQuantSuperBlock * sb, xh);
    const __m256 d = rp_fp16_lanes(rec + 1664);
    for (int h = 0; h < 2; ++h) {
      __m256i part[4][2];
      for (int k = 0; k < 4; ++k) part[k][0] = part[k][1] = _mm256_setzero_si256();
      for (int s = 0; s < 8; ++s) {
        __m256i w[4];
        weights(rec, h, s, w);
        for (int k = 0; k < 4; ++k)
          part[k][s / 4] = rp_dot4(part[k][s / 4], w[k], a.qs + 32 * (8 * sb + 4 * h + k) + 4 * s);
      }
      for (int k = 0; k < 4; ++k) {
        const int j = 4 * h + k;
        const int64_t b = 8 * sb + j;
        const int32_t xa = static_cast<int16_t>(xh[j] & 0xffff), xb = xh[j] >> 16;
        const __m256i isum = _mm256_add_epi32(
            _mm256_mullo_epi32(rp_i8_lanes(rec + 1536 + 8 * (2 * j)),
                               _mm256_sub_epi32(part[k][0], _mm256_set1_epi32(32 * xa))),
            _mm256_mullo_epi32(rp_i8_lanes(rec + 1536 + 8 * (2 * j + 1)),
                               _mm256_sub_epi32(part[k][1], _mm256_set1_epi32(32 * xb))));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(d, _mm256_set1_ps(a.qd[b])),
                              acc);
      }
    }
  }
};
LLMCTL_AVX512_END
#endif

}  // namespace

MatmulKernel matmul_kernel_q6_k(bool avx2) {
  return make_kquant_kernel<KQ6_K>(avx2, "q6_k avx2", "q6_k scalar");
}

MatmulKernel matmul_kernel_q6_k_avx512() {
  return make_paired_kernel_avx512<KQuantUnit, KQ6_K>("q6_k avx512-vnni (decode avx2)");
}

MatmulKernel matmul_kernel_q6_k_repacked() {
#if defined(LLMCTL_HAVE_X86)
  return make_repacked_kernel_avx512<RQ6_K>("q6_k avx512-vnni repacked-x8");
#else
  return MatmulKernel{};
#endif
}

}  // namespace llmctl::cpu
