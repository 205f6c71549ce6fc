// IQ4_XS weights (136-byte super-blocks of 256: fp16 d, the 6-bit scales ls of the 8 sub-blocks
// of 32 in scales_h / scales_l, 128 bytes of nibbles; w = d * (ls - 32) * kIq4nlValues[nibble])
// against int8 activations with one scale per super-block, as ggml's vec_dot_iq4_xs_q8_K: the
// K-quant tile (matmul_kquant_tile.h). Per super-block, exact in int32 (|tot| < 2^28):
//   tot = sum_j (ls_j - 32) * sum_l v[l] * q_x[l]          (v = kIq4nlValues[nibble], signed)
//   acc = fma(float(tot), d * d_x, acc)
// The products of signed levels: the AVX2 tile multiplies |v| by the activation with v's sign
// (maddubs, pairs <= 2 * 127 * 127, no saturation); the AVX-512 tile multiplies v + 128 (1..241,
// unsigned) by the activation (vpdpbusd) and takes 128 * sum_j (ls_j - 32) * xsum_j back once
// per super-block. Both give the same integers, so the same bits as the scalar kernel.
#include "backend/cpu/matmul_paired_tile_avx512.h"
#include "backend/cpu/matmul_repacked_tile.h"
#include "backend/cpu/weight_repack.h"

namespace llmctl::cpu {

namespace {

struct KQIq4Xs {
  static constexpr size_t kBytes = 136;
  static constexpr int kTokens = 6;
  static constexpr int kActivationGroup = 256;
  static constexpr bool kPairSums = true;  // the AVX-512 tile's +128 back (superblock512)

  static float scalar_superblock(const uint8_t* sb, const int8_t* qx, float dx, const int32_t* xsum,
                                 float acc) {
    (void)xsum;
    int32_t tot = 0;
    for (int j = 0; j < 8; ++j) {
      int32_t isum = 0;
      for (int l = 0; l < 32; ++l) isum += iq4_value(sb + 8 + 16 * j, l) * qx[32 * j + l];
      tot += iq4_xs_scale(sb, j) * isum;
    }
    return std::fma(static_cast<float>(tot), fp16_to_f32(load_u16_le(sb)) * dx, acc);
  }

#if defined(LLMCTL_HAVE_X86)
  // Panel record (8 rows, one super-block):
  //   w[8][8]  at 256 j + 32 s: block j, levels 4s..4s+3 of rows 0..7, signed int8
  //   sc[8]    at 2048 + 32 j: 8 int32, ls_j - 32 of each row
  //   sp[4]    at 2304 + 32 p: 8 int32, (ls_2p - 32) | (ls_2p+1 - 32) << 16 (int16 pairs)
  //   d        at 2432: 8 floats
  static constexpr size_t kScOffset = 2048, kPairOffset = 2304, kDOffset = 2432;
  static constexpr size_t kPanelBytes = 2464;

  LLMCTL_AVX2 static void pack(const uint8_t* const rows[8], size_t off, uint8_t* p) {
    __m256i g[4];  // g[0]: d | scales_h << 16; g[1]: scales_l[0..3]
    kq_transpose16(rows, off, g);
    _mm256_storeu_ps(reinterpret_cast<float*>(p + kDOffset), kq_fp16_lanes(g[0], false));
    const __m256i low4 = _mm256_set1_epi32(15), low2 = _mm256_set1_epi32(3),
                  bias = _mm256_set1_epi32(32), low16 = _mm256_set1_epi32(0xffff);
    __m256i sc[8];
    for (int j = 0; j < 8; ++j) {  // ls = (scales_l >> 4j) & 15 | ((scales_h >> 2j) & 3) << 4
      const __m256i lo = _mm256_and_si256(_mm256_srl_epi32(g[1], _mm_cvtsi32_si128(4 * j)), low4);
      const __m256i hi =
          _mm256_and_si256(_mm256_srl_epi32(g[0], _mm_cvtsi32_si128(16 + 2 * j)), low2);
      sc[j] = _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), bias);
      kq_store(p + kScOffset + 32 * j, sc[j]);
    }
    for (int q = 0; q < 4; ++q)
      kq_store(p + kPairOffset + 32 * q, _mm256_or_si256(_mm256_and_si256(sc[2 * q], low16),
                                                         _mm256_slli_epi32(sc[2 * q + 1], 16)));
    const __m256i table = _mm256_broadcastsi128_si256(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
    const __m256i nib = _mm256_set1_epi8(0x0f);
    for (int j = 0; j < 8; ++j) {
      __m256i q[4];  // q[k] lane r: bytes 4k..4k+3 of row r's sub-block j: levels 4k.., 16 + 4k..
      kq_transpose16(rows, off + 8 + 16 * static_cast<size_t>(j), q);
      for (int k = 0; k < 4; ++k) {
        kq_store(p + 256 * j + 32 * k, _mm256_shuffle_epi8(table, _mm256_and_si256(q[k], nib)));
        kq_store(p + 256 * j + 32 * (4 + k),
                 _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(q[k], 4), nib)));
      }
    }
  }

  // The panel's super-block for T tokens (8 rows): exact sums of signed products.
  template <int T>
  LLMCTL_AVX2 static void superblock(const uint8_t* p, const TileArgs& a, int64_t sb, __m256* acc) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i tot[static_cast<size_t>(T)];
    for (int t = 0; t < T; ++t) tot[t] = _mm256_setzero_si256();
    for (int j = 0; j < 8; ++j) {
      const int8_t* qx = a.qs + kKQuantSuperBlock * sb + 32 * j;
      __m256i isum[static_cast<size_t>(T)];
      for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
      for (int s = 0; s < 8; ++s) {
        const __m256i w = kq_load(p + 256 * j + 32 * s), aw = _mm256_abs_epi8(w);
        for (int t = 0; t < T; ++t) {
          const __m256i x = _mm256_sign_epi8(kq_bcast4(qx + t * a.n + 4 * s), w);
          isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(_mm256_maddubs_epi16(aw, x), ones));
        }
      }
      const __m256i sc = kq_load(p + kScOffset + 32 * j);
      for (int t = 0; t < T; ++t)
        tot[t] = _mm256_add_epi32(tot[t], _mm256_mullo_epi32(isum[t], sc));
    }
    const int64_t nb = a.n / 32;
    const __m256 d = _mm256_loadu_ps(reinterpret_cast<const float*>(p + kDOffset));
    for (int t = 0; t < T; ++t) {
      const __m256 dx = _mm256_set1_ps(a.qd[t * nb + 8 * sb]);
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(tot[t]), _mm256_mul_ps(d, dx), acc[t]);
    }
  }

  // The same over a 16-row panel record (matmul_paired_tile_avx512.h: every offset doubled).
  LLMCTL_AVX512_BEGIN
  template <int T>
  LLMCTL_AVX512 static void superblock512(const uint8_t* p, const TileArgs& a, int64_t sb,
                                          __m512* acc) {
    const int64_t nb = a.n / 32;
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));  // v -> v + 128, unsigned
    __m512i tot[static_cast<size_t>(T)];
    for (int t = 0; t < T; ++t) tot[t] = _mm512_setzero_si512();
    for (int j = 0; j < 8; ++j) {
      const int8_t* qx = a.qs + kKQuantSuperBlock * sb + 32 * j;
      __m512i isum[static_cast<size_t>(T)];
      for (int t = 0; t < T; ++t) isum[t] = _mm512_setzero_si512();
      for (int s = 0; s < 8; ++s) {
        const __m512i u = _mm512_xor_si512(_mm512_loadu_si512(p + 512 * j + 64 * s), flip);
        for (int t = 0; t < T; ++t) isum[t] = dot4_u8s8_bcast(isum[t], u, qx + t * a.n + 4 * s);
      }
      const __m512i sc = _mm512_loadu_si512(p + 2 * kScOffset + 64 * j);
      for (int t = 0; t < T; ++t)
        tot[t] = _mm512_add_epi32(tot[t], _mm512_mullo_epi32(isum[t], sc));
    }
    const __m512 d = _mm512_loadu_ps(p + 2 * kDOffset);
    for (int t = 0; t < T; ++t) {
      // 128 * sum_j (ls_j - 32) * xsum_j: the products' +128 taken back
      const int32_t* xpair = a.qpair + (t * nb + 8 * sb) / 2;
      __m512i back = _mm512_setzero_si512();
      for (int q = 0; q < 4; ++q)
        back = _mm512_dpwssd_epi32(back, _mm512_loadu_si512(p + 2 * kPairOffset + 64 * q),
                                   _mm512_set1_epi32(xpair[q]));
      const __m512i exact = _mm512_sub_epi32(tot[t], _mm512_slli_epi32(back, 7));
      const __m512 dx = _mm512_set1_ps(a.qd[t * nb + 8 * sb]);
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(exact), _mm512_mul_ps(d, dx), acc[t]);
    }
  }
  LLMCTL_AVX512_END
#endif
};

#if defined(LLMCTL_HAVE_X86)
// The repacked IQ4_XS record (weight_repack.h: nibble vectors at 0, int8 scales ls - 32 at 1024,
// fp16 d at 1088): vector (j, k) holds what KQIq4Xs::pack's transpose gives as q[k] of
// sub-block j, so the 8 rows' levels come from one load and a table lookup per half.
LLMCTL_AVX512_BEGIN
struct RIq4Xs {
  using KQ = KQIq4Xs;
  static constexpr size_t kRecordBytes = kIq4xsRecordBytes;
  static constexpr size_t kScalesAt = 1024, kDAt = 1088;

  LLMCTL_AVX2 static __m256i levels() {  // the 16 signed levels, in both 128-bit lanes
    return _mm256_broadcastsi128_si256(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
  }
  // The levels of vector (j, k): half 0 levels 4k..4k+3, half 1 levels 16 + 4k.. of each row.
  LLMCTL_AVX2 static __m256i half(__m256i table, __m256i g, int h) {
    const __m256i nib = _mm256_set1_epi8(0x0f);
    return _mm256_shuffle_epi8(table, _mm256_and_si256(h == 0 ? g : _mm256_srli_epi16(g, 4), nib));
  }
  LLMCTL_AVX2 static __m256i scale(const uint8_t* rec, int j) {
    return rp_i8_lanes(rec + kScalesAt + 8 * j);
  }

  // KQIq4Xs's 8-row panel record, the bytes its pack writes from the GGUF rows.
  LLMCTL_AVX2 static void unpack(const uint8_t* rec, uint8_t* p) {
    const __m256i table = levels(), low16 = _mm256_set1_epi32(0xffff);
    for (int j = 0; j < 8; ++j) kq_store(p + KQ::kScOffset + 32 * j, scale(rec, j));
    for (int q = 0; q < 4; ++q)
      kq_store(p + KQ::kPairOffset + 32 * q,
               _mm256_or_si256(_mm256_and_si256(scale(rec, 2 * q), low16),
                               _mm256_slli_epi32(scale(rec, 2 * q + 1), 16)));
    _mm256_storeu_ps(reinterpret_cast<float*>(p + KQ::kDOffset), rp_fp16_lanes(rec + kDAt));
    for (int j = 0; j < 8; ++j)
      for (int k = 0; k < 4; ++k) {
        const __m256i g = kq_load(rec + 32 * (4 * j + k));
        kq_store(p + 256 * j + 32 * k, half(table, g, 0));
        kq_store(p + 256 * j + 32 * (4 + k), half(table, g, 1));
      }
  }

  // acc[t] from token t's super-block sum tot[t].
  template <int T>
  LLMCTL_AVX2 static void finish(const uint8_t* rec, const TileArgs& a, int64_t sb,
                                 const __m256i* tot, __m256* acc) {
    const __m256 d = rp_fp16_lanes(rec + kDAt);
    for (int t = 0; t < T; ++t) {
      const __m256 dx = _mm256_set1_ps(a.qd[t * (a.n / 32) + 8 * sb]);
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(tot[t]), _mm256_mul_ps(d, dx), acc[t]);
    }
  }

  // AVX-512 VL VNNI decode of T tokens (token t's activations t * n further): the levels + 128
  // (unsigned) by vpdpbusd, exact int32 sums, then 128 times the block's activation sum off
  // before the block's scale.
  template <int T>
  LLMCTL_AVX512 static void decode(const uint8_t* rec, const TileArgs& a, int64_t sb, __m256* acc) {
    const int64_t nb = a.n / 32;
    const __m256i table = _mm256_xor_si256(levels(), _mm256_set1_epi8(static_cast<char>(0x80)));
    __m256i tot[static_cast<size_t>(T)];
    for (int t = 0; t < T; ++t) tot[t] = _mm256_setzero_si256();
    for (int j = 0; j < 8; ++j) {
      const int64_t b = 8 * sb + j;
      const int8_t* qx = a.qs + 32 * b;
      __m256i isum[static_cast<size_t>(T)][2];
      for (int t = 0; t < T; ++t) isum[t][0] = isum[t][1] = _mm256_setzero_si256();
      for (int k = 0; k < 4; ++k) {
        const __m256i g = kq_load(rec + 32 * (4 * j + k));
        for (int h = 0; h < 2; ++h) {
          const __m256i v = half(table, g, h);
          for (int t = 0; t < T; ++t)
            isum[t][h] = rp_dot4(isum[t][h], v, qx + t * a.n + 16 * h + 4 * k);
        }
      }
      const __m256i sc = scale(rec, j);
      for (int t = 0; t < T; ++t) {
        const __m256i exact = _mm256_sub_epi32(_mm256_add_epi32(isum[t][0], isum[t][1]),
                                               _mm256_set1_epi32(128 * a.qsum[t * nb + b]));
        tot[t] = _mm256_add_epi32(tot[t], _mm256_mullo_epi32(exact, sc));
      }
    }
    finish<T>(rec, a, sb, tot, acc);
  }

  // AVX2 decode of T tokens: |level| x the activation given the level's sign (maddubs pairs
  // <= 2 * 127 * 127, no saturation), as KQIq4Xs::superblock.
  template <int T>
  LLMCTL_AVX2 static void decode_avx2(const uint8_t* rec, const TileArgs& a, int64_t sb,
                                      __m256* acc) {
    const __m256i table = levels(), ones = _mm256_set1_epi16(1);
    __m256i tot[static_cast<size_t>(T)];
    for (int t = 0; t < T; ++t) tot[t] = _mm256_setzero_si256();
    for (int j = 0; j < 8; ++j) {
      const int8_t* qx = a.qs + 32 * (8 * sb + j);
      __m256i isum[static_cast<size_t>(T)];
      for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
      for (int k = 0; k < 4; ++k) {
        const __m256i g = kq_load(rec + 32 * (4 * j + k));
        for (int h = 0; h < 2; ++h) {
          const __m256i v = half(table, g, h), mag = _mm256_abs_epi8(v);
          for (int t = 0; t < T; ++t) {
            const __m256i x = _mm256_sign_epi8(kq_bcast4(qx + t * a.n + 16 * h + 4 * k), v);
            isum[t] =
                _mm256_add_epi32(isum[t], _mm256_madd_epi16(_mm256_maddubs_epi16(mag, x), ones));
          }
        }
      }
      const __m256i sc = scale(rec, j);
      for (int t = 0; t < T; ++t)
        tot[t] = _mm256_add_epi32(tot[t], _mm256_mullo_epi32(isum[t], sc));
    }
    finish<T>(rec, a, sb, tot, acc);
  }
};
LLMCTL_AVX512_END
#else
struct RIq4Xs;  // x86 only: the kernels' factories give none elsewhere
#endif

}  // namespace

MatmulKernel matmul_kernel_iq4_xs(bool avx2) {
  return make_kquant_kernel<KQIq4Xs>(avx2, "iq4_xs avx2", "iq4_xs scalar");
}

MatmulKernel matmul_kernel_iq4_xs_avx512() {
  return make_paired_kernel_avx512<KQuantUnit, KQIq4Xs>("iq4_xs avx512-vnni (decode avx2)");
}

MatmulKernel matmul_kernel_iq4_xs_repacked() {
  return make_repacked_kernel_avx512<RIq4Xs>("iq4_xs avx512-vnni repacked-x8");
}

MatmulKernel matmul_kernel_iq4_xs_repacked_avx2() {
  return make_repacked_kernel_avx2<RIq4Xs>("iq4_xs avx2 repacked-x8");
}

}  // namespace llmctl::cpu
