// Q2_K weights (84-byte super-blocks of 256: 16 scale bytes (low nibble sc, high nibble m per
// 16-element sub-block), 64 bytes of 2-bit quants, fp16 d, fp16 dmin; w = (d*sc) * q - dmin*m,
// q in 0..3) against int8 activations: the K-quant tile (matmul_kquant_tile.h) with the record
// of the 16-element sub-block types (matmul_k16_tile.h, with a min). ggml's vec_dot_q2_K_q8_K
// sums sc * (q . x) and m * (sum x) per 16 elements over the super-block against one activation
// scale, as here: one exact integer sum for the q part and one for the min part, then one fma
// each.
#include "backend/cpu/matmul_k16_tile.h"
#include "backend/cpu/matmul_repacked_tile.h"
#include "backend/cpu/weight_repack.h"

namespace llmctl::cpu {

namespace {

struct KQ2_K : KQ16Panel<true, 3> {
  static constexpr size_t kBytes = 84;
  static constexpr int kTokens = 6;

  // Per block j: isum_j = sc_2j * sum_{l<16} q x + sc_2j+1 * sum_{l>=16} q x,
  // msum_j = m_2j * sum_{l<16} x + m_2j+1 * sum_{l>=16} x; over the super-block
  // acc = fma(float(sum isum_j), d * d_x, acc), then fma(-float(sum msum_j), dmin * d_x, acc).
  static float scalar_superblock(const uint8_t* sb, const int8_t* qx, float dx, const int32_t* xsum,
                                 float acc) {
    (void)xsum;
    int32_t tot = 0, msum = 0;
    for (int j = 0; j < 8; ++j) {
      int dot[2] = {0, 0}, xs[2] = {0, 0};
      for (int l = 0; l < 32; ++l) {
        dot[l / 16] += q2_k_value(sb, 32 * j + l) * qx[32 * j + l];
        xs[l / 16] += qx[32 * j + l];
      }
      const uint8_t a = sb[2 * j], b = sb[2 * j + 1];
      tot += (a & 0x0f) * dot[0] + (b & 0x0f) * dot[1];
      msum += (a >> 4) * xs[0] + (b >> 4) * xs[1];
    }
    acc = std::fma(static_cast<float>(tot), fp16_to_f32(load_u16_le(sb + 80)) * dx, acc);
    return std::fma(-static_cast<float>(msum), fp16_to_f32(load_u16_le(sb + 82)) * dx, acc);
  }

#if defined(LLMCTL_HAVE_X86)
  // The record's scales: sc_a / sc_b the low nibbles of scale bytes 2j, 2j + 1, o their high
  // nibbles (m); d, dmin.
  LLMCTL_AVX2 static void pack_scales(const uint8_t* const rows[8], size_t off, uint8_t* p) {
    __m256i g[4];  // g[c] lane r: scale bytes 4c..4c+3 of row r (blocks 2c, 2c + 1)
    kq_transpose16(rows, off, g);
    const __m256i nib = _mm256_set1_epi8(0x0f);
    for (int c = 0; c < 4; ++c) {
      const __m256i sc = _mm256_and_si256(g[c], nib);
      const __m256i m = _mm256_and_si256(_mm256_srli_epi16(g[c], 4), nib);
      for (int e = 0; e < 2; ++e) {  // block 2c + e: bytes 2e, 2e + 1 of the dword
        const int j = 2 * c + e;
        kq_store(p + kSaOffset + 32 * j, _mm256_shuffle_epi8(sc, pair_pick(2 * e, 2 * e)));
        kq_store(p + kSbOffset + 32 * j, _mm256_shuffle_epi8(sc, pair_pick(2 * e + 1, 2 * e + 1)));
        kq_store(p + kOffOffset + 32 * j, _mm256_shuffle_epi8(m, pair_pick(2 * e, 2 * e + 1)));
      }
    }
    __m256i gd[4];  // bytes 68..83: d | dmin << 16 is dword 3
    kq_transpose16(rows, off + 68, gd);
    _mm256_storeu_ps(reinterpret_cast<float*>(p + kDOffset), kq_fp16_lanes(gd[3], false));
    _mm256_storeu_ps(reinterpret_cast<float*>(p + kDminOffset), kq_fp16_lanes(gd[3], true));
  }

  // Elements 128h + 32k + l are block 4h + k, bits 2k, 2k + 1 of quant byte 32h + l: step s of
  // block 4h + k from q[s] (the 8 rows' bytes 32h + 4s .. + 3); the 16-bit shift keeps the
  // two bits inside their byte.
  LLMCTL_AVX2 static __m256i weights(__m256i q, int k) {
    return _mm256_and_si256(_mm256_srl_epi16(q, _mm_cvtsi32_si128(2 * k)), _mm256_set1_epi8(3));
  }

  LLMCTL_AVX2 static void pack(const uint8_t* const rows[8], size_t off, uint8_t* p) {
    pack_scales(rows, off, p);
    for (int h = 0; h < 2; ++h) {
      __m256i q[8];
      kq_transpose32(rows, off + 16 + 32 * static_cast<size_t>(h), q);
      for (int k = 0; k < 4; ++k)
        for (int s = 0; s < 8; ++s) kq_store(p + 256 * (4 * h + k) + 32 * s, weights(q[s], k));
    }
  }

  // Decode (one token): the weights straight from registers, the scales through the record;
  // the same integer sums and float steps as pack + superblock<1>, so the same bits.
  static constexpr bool kFusedDecode = true;
  LLMCTL_AVX2 static void decode_superblock(const uint8_t* const rows[8], size_t off,
                                            const TileArgs& a, int64_t sb, __m256* acc) {
    alignas(32) uint8_t p[kPanelBytes];  // only the scales part is written
    pack_scales(rows, off, p);
    __m256i tot = _mm256_setzero_si256(), ms = tot;
    for (int h = 0; h < 2; ++h) {
      __m256i q[8];
      kq_transpose32(rows, off + 16 + 32 * static_cast<size_t>(h), q);
      for (int k = 0; k < 4; ++k) {
        __m256i w[8];
        for (int s = 0; s < 8; ++s) w[s] = weights(q[s], k);
        block_sums(p, 4 * h + k, w, a, sb, 0, tot, ms);
      }
    }
    acc[0] = finish(p, a, sb, 0, tot, ms, acc[0]);
  }
#endif
};

#if defined(LLMCTL_HAVE_X86)
// The repacked Q2_K record (weight_repack.h: quant vectors at 0, the scale bytes at 512 in
// pairs by block and row, fp16 d at 640 and dmin at 656; the GGUF's 84 bytes a row): vector
// (h, s) is what KQ2_K::pack's transpose gives as q[s] of half h, so the 8 rows' weights of
// step s of block 4 h + k are one load, a shift and a mask (the AVX-512 decode: a mask only).
LLMCTL_AVX512_BEGIN
struct RQ2_K {
  using KQ = KQ2_K;
  static constexpr size_t kRecordBytes = kQ2kRecordBytes;
  static constexpr size_t kScalesAt = 512, kDAt = 640, kDminAt = 656;

  LLMCTL_AVX2 static __m256i weight(const uint8_t* rec, int h, int k, int s) {
    return KQ::weights(kq_load(rec + 32 * (8 * h + s)), k);
  }
  // Step s of the half's 4 blocks from one load (block 4 h + k: bits 2 k, 2 k + 1; k = 0 needs
  // no shift): rp_half_maddubs's operand.
  LLMCTL_AVX2 static void weights(const uint8_t* rec, int h, int s, __m256i w[4]) {
    const __m256i q = kq_load(rec + 32 * (8 * h + s)), three = _mm256_set1_epi8(3);
    for (int k = 0; k < 4; ++k)
      w[k] = _mm256_and_si256(k == 0 ? q : _mm256_srli_epi16(q, 2 * k), three);
  }
  // Block j's two scale bytes per row lane, as the int16 pair (byte 2 j, byte 2 j + 1): one
  // widening load. Their low nibbles are the sub-blocks' scales (sc_a, sc_b), their high
  // nibbles the mins (m_a, m_b): the pairs a madd (or vpdpwssd) takes against the halves.
  LLMCTL_AVX2 static __m256i scale_bytes(const uint8_t* rec, int j) {
    return _mm256_cvtepu8_epi16(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(rec + kScalesAt + 16 * j)));
  }
  LLMCTL_AVX2 static __m256i scale_pair(__m256i bytes) {
    return _mm256_and_si256(bytes, _mm256_set1_epi16(15));
  }
  LLMCTL_AVX2 static __m256i min_pair(__m256i bytes) { return _mm256_srli_epi16(bytes, 4); }

  // KQ2_K's 8-row panel record, the bytes its pack writes from the GGUF rows.
  LLMCTL_AVX2 static void unpack(const uint8_t* rec, uint8_t* p) {
    const __m256i nib = _mm256_set1_epi32(15);
    for (int j = 0; j < 8; ++j) {
      const __m256i b = scale_bytes(rec, j);  // lane: byte_a | byte_b << 16
      KQ::store_scales(p, j, _mm256_and_si256(b, nib),
                       _mm256_and_si256(_mm256_srli_epi32(b, 16), nib),
                       _mm256_and_si256(_mm256_srli_epi32(b, 4), nib), _mm256_srli_epi32(b, 20));
    }
    _mm256_storeu_ps(reinterpret_cast<float*>(p + KQ::kDOffset), rp_fp16_lanes(rec + kDAt));
    _mm256_storeu_ps(reinterpret_cast<float*>(p + KQ::kDminOffset), rp_fp16_lanes(rec + kDminAt));
    for (int h = 0; h < 2; ++h)
      for (int k = 0; k < 4; ++k)
        for (int s = 0; s < 8; ++s) kq_store(p + 256 * (4 * h + k) + 32 * s, weight(rec, h, k, s));
  }

  // acc[t] from token t's super-block sums: KQ16Panel::finish's float steps.
  template <int T>
  LLMCTL_AVX2 static void finish(const uint8_t* rec, const TileArgs& a, int64_t sb,
                                 const __m256i* tot, const __m256i* ms, __m256* acc) {
    const __m256 d = rp_fp16_lanes(rec + kDAt), dmin = rp_fp16_lanes(rec + kDminAt);
    for (int t = 0; t < T; ++t) {
      const __m256 dx = _mm256_set1_ps(a.qd[t * (a.n / 32) + 8 * sb]);
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(tot[t]), _mm256_mul_ps(d, dx), acc[t]);
      acc[t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(ms[t]), _mm256_mul_ps(dmin, dx), acc[t]);
    }
  }

  // Block j's half sums part[0..1] (of the weights q << 2 k, k = j % 4) and its halves'
  // activation sums xhalf into tot and ms. (sum_a, sum_b) as int16: sum_b's low 2 k bits are
  // zero, so << (16 - 2 k) leaves exactly sum_b / 4^k in the high half.
  LLMCTL_AVX512 static inline __attribute__((always_inline)) void add_block(
      const uint8_t* rec, int j, const __m256i part[2], int32_t xhalf, __m256i& tot, __m256i& ms) {
    const int k = j % 4;
    const __m256i bytes = scale_bytes(rec, j);
    const __m256i sums = _mm256_blend_epi16(_mm256_srai_epi32(part[0], 2 * k),
                                            _mm256_slli_epi32(part[1], 16 - 2 * k), 0xaa);
    tot = _mm256_dpwssd_epi32(tot, sums, scale_pair(bytes));
    ms = _mm256_dpwssd_epi32(ms, _mm256_set1_epi32(xhalf), min_pair(bytes));
  }

  // AVX-512 VL VNNI decode of T tokens (token t's activations t * n further), block by block:
  // exact int32 vpdpbusd sums per half block. Block 4 h + k multiplies its weights where they
  // sit, q << 2 k (one mask, no shift; at most 192, unsigned), so each half's sum is a multiple
  // of 4^k; shifted back, it fits int16 (|sum| <= 16 * 3 * 128), and the two halves as one
  // int16 pair meet the scale pair in one vpdpwssd: sc_a * sum_a + sc_b * sum_b, the same
  // integer as two vpmulld and adds. The mins likewise against the halves' activation sums
  // (TileArgs::qhalf, the int16 pair (xa, xb)). One token: one_token.
  template <int T>
  LLMCTL_AVX512 static void decode(const uint8_t* rec, const TileArgs& a, int64_t sb, __m256* acc) {
    if constexpr (T == 1) {
      one_token(rec, a, sb, acc);
      return;
    }
    const int64_t nb = a.n / 32;
    __m256i tot[static_cast<size_t>(T)], ms[static_cast<size_t>(T)];
    for (int t = 0; t < T; ++t) tot[t] = ms[t] = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h)
      for (int k = 0; k < 4; ++k) {
        const int j = 4 * h + k;
        const int64_t b = 8 * sb + j;
        const int8_t* qx = a.qs + 32 * b;
        const __m256i bits = _mm256_set1_epi8(static_cast<char>(3 << (2 * k)));
        __m256i part[static_cast<size_t>(T)][2];
        for (int t = 0; t < T; ++t) part[t][0] = part[t][1] = _mm256_setzero_si256();
        for (int s = 0; s < 8; ++s) {
          const __m256i w = _mm256_and_si256(kq_load(rec + 32 * (8 * h + s)), bits);
          for (int t = 0; t < T; ++t)
            part[t][s / 4] = rp_dot4(part[t][s / 4], w, qx + t * a.n + 4 * s);
        }
        for (int t = 0; t < T; ++t) add_block(rec, j, part[t], a.qhalf[t * nb + b], tot[t], ms[t]);
      }
    finish<T>(rec, a, sb, tot, ms, acc);
  }

  // One token, step s of a half's 4 blocks at once: they share their quant bytes (block 4 h + k
  // holds bits 2 k, 2 k + 1), so one load serves 4 masks and 4 vpdpbusd, 8 sums in flight.
  // Block by block (8 loads of the same vectors, 2 sums in flight), one token decoded 1.25x
  // slower with the weights in L2 and 1.10x slower from memory at one and two threads
  // (2048x8192, 8192x2048, alternated in one process).
  LLMCTL_AVX512 static void one_token(const uint8_t* rec, const TileArgs& a, int64_t sb,
                                      __m256* acc) {
    __m256i tot = _mm256_setzero_si256(), ms = tot;
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const int8_t* qx = a.qs + 32 * (8 * sb + 4 * h);
      __m256i part[4][2];
      for (auto& p : part) p[0] = p[1] = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int s = 0; s < 8; ++s) {
        const __m256i q = kq_load(rec + 32 * (8 * h + s));
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) {
          const __m256i w = _mm256_and_si256(q, _mm256_set1_epi8(static_cast<char>(3 << (2 * k))));
          part[k][s / 4] = rp_dot4(part[k][s / 4], w, qx + 32 * k + 4 * s);
        }
      }
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k)
        add_block(rec, 4 * h + k, part[k], a.qhalf[8 * sb + 4 * h + k], tot, ms);
    }
    finish<1>(rec, a, sb, &tot, &ms, acc);
  }

  // The AVX2 madds' scale operands of block j: (sc_a, sc_a) and (sc_b, sc_b) per row lane.
  LLMCTL_AVX2 static void scale_pairs_avx2(__m256i bytes, __m256i& pa, __m256i& pb) {
    const __m256i sc = scale_pair(bytes);  // (sc_a, sc_b), each <= 15
    pa = _mm256_blend_epi16(sc, _mm256_slli_epi32(sc, 16), 0xaa);
    pb = _mm256_blend_epi16(_mm256_srli_epi32(sc, 16), sc, 0xaa);
  }

  // AVX2 decode of T tokens: KQ16Panel::dot's maddubs steps (4 in int16) and madds with the
  // scale pairs (sc_a, sc_a) and (sc_b, sc_b). One token: one_token_avx2.
  template <int T>
  LLMCTL_AVX2 static void decode_avx2(const uint8_t* rec, const TileArgs& a, int64_t sb,
                                      __m256* acc) {
    if constexpr (T == 1) {
      one_token_avx2(rec, a, sb, acc);
      return;
    }
    const int64_t nb = a.n / 32;
    __m256i tot[static_cast<size_t>(T)], ms[static_cast<size_t>(T)];
    for (int t = 0; t < T; ++t) tot[t] = ms[t] = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h)
      for (int k = 0; k < 4; ++k) {
        const int j = 4 * h + k;
        const int64_t b = 8 * sb + j;
        __m256i w[8];
        for (int s = 0; s < 8; ++s) w[s] = weight(rec, h, k, s);
        const __m256i bytes = scale_bytes(rec, j);
        __m256i pa, pb;
        scale_pairs_avx2(bytes, pa, pb);
        for (int t = 0; t < T; ++t) {
          tot[t] = _mm256_add_epi32(tot[t], KQ::dot(w, a.qs + t * a.n + 32 * b, pa, pb));
          ms[t] = _mm256_add_epi32(
              ms[t], _mm256_madd_epi16(_mm256_set1_epi32(a.qhalf[t * nb + b]), min_pair(bytes)));
        }
      }
    finish<T>(rec, a, sb, tot, ms, acc);
  }

  // One token with AVX2, as one_token: rp_half_maddubs's sums (weights: step s of a half's 4
  // blocks from one load), then decode_avx2's madds, so the same integers. Against block by block,
  // held to AVX2 on the Xeon: 1.08x to 1.09x with the weights in cache, 1.02x to 1.07x from memory
  // (one and two threads, 2048x8192 and 8192x2048).
  LLMCTL_AVX2 static void one_token_avx2(const uint8_t* rec, const TileArgs& a, int64_t sb,
                                         __m256* acc) {
    __m256i tot = _mm256_setzero_si256(), ms = tot;
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      __m256i part[4][2];
      rp_half_maddubs<RQ2_K>(rec, h, a.qs + 32 * (8 * sb + 4 * h), part);
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        const int j = 4 * h + k;
        const __m256i bytes = scale_bytes(rec, j);
        __m256i pa, pb;
        scale_pairs_avx2(bytes, pa, pb);
        tot = _mm256_add_epi32(tot, _mm256_add_epi32(_mm256_madd_epi16(part[k][0], pa),
                                                     _mm256_madd_epi16(part[k][1], pb)));
        ms = _mm256_add_epi32(
            ms, _mm256_madd_epi16(_mm256_set1_epi32(a.qhalf[8 * sb + j]), min_pair(bytes)));
      }
    }
    finish<1>(rec, a, sb, &tot, &ms, acc);
  }
};
LLMCTL_AVX512_END
#else
struct RQ2_K;  // x86 only: the kernels' factories give none elsewhere
#endif

}  // namespace

MatmulKernel matmul_kernel_q2_k(bool avx2) {
  return make_kquant_kernel<KQ2_K>(avx2, "q2_k avx2", "q2_k scalar");
}

MatmulKernel matmul_kernel_q2_k_avx512() {
  return make_paired_kernel_avx512<KQuantUnit, KQ2_K>("q2_k avx512-vnni (decode avx2)");
}

MatmulKernel matmul_kernel_q2_k_repacked() {  // half_sums: KQ2_K's (set_kquant_activations)
  return make_repacked_kernel_avx512<RQ2_K>("q2_k avx512-vnni repacked-x8");
}

MatmulKernel matmul_kernel_q2_k_repacked_avx2() {
  return make_repacked_kernel_avx2<RQ2_K>("q2_k avx2 repacked-x8");
}

}  // namespace llmctl::cpu
