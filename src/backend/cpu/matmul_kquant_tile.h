#pragma once
// Internal to the matmul fast path: the tile kernel for K-quant weights (Q2_K ... Q6_K, and
// IQ4_XS: matmul_iq4_xs.cpp) against the int8 activations of quantize_activations.h with one
// scale per super-block (KQ::kActivationGroup = 256, as ggml's Q8_K: int8 q_x, float scale
// d_x; block sum xsum = sum q_x per 32 elements). A 256-element super-block is 8 activation
// blocks; block j of a super-block is Q4_K/Q5_K sub-block j, or the 16-element sub-blocks 2j
// and 2j + 1 of Q2_K, Q3_K, Q6_K. Layouts and scale packing: quant/dequant.h.
//
// Arithmetic (the contract every kernel of a type shares, bit for bit): for each (row r,
// token t), over the row's super-blocks in order, starting from acc = 0, with exact integer
// sums over the super-block (|tot| < 2^28; its conversion to float rounds, the same way in
// every kernel):
//   Q4_K, Q5_K (w = (d*sc_j) * q - dmin*m_j, q in 0..15 / 0..31):
//     tot  = sum_j sc_j * sum_l q[l] * q_x[l],   msum = sum_j m_j * xsum_j
//     acc  = fma(float(tot), d * d_x, acc);      acc = fma(-float(msum), dmin * d_x, acc)
//   Q6_K (w = (d*sc_s) * (q - 32), q in 0..63, int8 sc_s per 16 elements):
//     tot  = sum_j sc_{2j} * sum_{l<16} (q[l] - 32) q_x[l] + sc_{2j+1} * sum_{l>=16} (...)
//     acc  = fma(float(tot), d * d_x, acc)
//   Q3_K (w = (d*(sc_s - 32)) * q, q in -4..3, 6-bit sc_s per 16 elements): as Q6_K with
//     sc_s - 32 for sc_s and q for q - 32
//   Q2_K (w = (d*sc_s) * q - dmin*m_s, q in 0..3, 4-bit sc_s and m_s per 16 elements):
//     tot  = sum_j sc_{2j} * sum_{l<16} q[l] q_x[l] + sc_{2j+1} * sum_{l>=16} q[l] q_x[l]
//     msum = sum_j m_{2j} * sum_{l<16} q_x[l] + m_{2j+1} * sum_{l>=16} q_x[l]
//     acc  = fma(float(tot), d * d_x, acc);      acc = fma(-float(msum), dmin * d_x, acc)
// and out[t][r] = acc. The integer sums are exact, so how a kernel forms them (lane layout,
// int16 partial sums, where the -32 goes) does not change a bit; the float steps above are
// the same instructions in every kernel. Two float steps a super-block, not a block: the
// vpdpbusd steps of the AVX-512 tiles wait behind fewer other vector operations.
//
// AVX2 layout: as matmul_quant_tile.h, the 8 rows of a tile are the SIMD lanes, and a block's
// weights are transposed so that one 32-byte vector holds 4 consecutive weights of each row
// (step s: weights 4s..4s+3), multiplied by the token's 4 activation bytes broadcast (maddubs,
// unsigned weights x signed activations). A super-block of the 8 rows is unpacked at once
// into a panel record (KQ::pack; layout per type below): its scales are decoded once per
// super-block, not per block. Prefill packs each row tile once per token chunk (the panel of
// run_rows); decode packs one super-block at a time into a stack buffer (L1) as it streams
// the GGUF rows in place, prefetching the next tile as matmul_quant_tile.h does.
//
// The int8 dot products of a block (8 rows x 32 weights against T tokens' 32 activations) are
// a small function per type (KQ45_K::scaled_dots, KQ16Panel::dot), so that a VNNI variant
// (dpbusd) can replace it. Each weight vector is loaded once for the T tokens (prefill reads
// the panel from L1/L2).
//
// Type traits KQ:
//   kBytes                super-block bytes;  kPanelBytes  panel bytes per super-block
//   kTokens               tokens per prefill tile (<= 8)
//   kActivationGroup      256 (MatmulKernel::activation_group)
//   scalar_superblock(sb, q_x, d_x, xsum[8], acc) -> acc   super-block sb (the definition)
//   pack(rows, off, panel)                    AVX2: the 8 rows' super-block at byte off
//   superblock<T>(panel, a, sb, acc)          AVX2: acc[t] over the super-block's 8 blocks
//   superblock512<T>(panel16, a, sb, acc)     AVX-512: the same, 16 rows
// Q4_K and Q5_K share one trait (matmul_q45_k.h); Q2_K, Q3_K and Q6_K (matmul_q2_k.cpp,
// matmul_q3_k.cpp, matmul_q6_k.cpp) share a panel record and its products (matmul_k16_tile.h).
// Their AVX-512 prefill tile (superblock512) is matmul_paired_tile_avx512.h's.

#include <type_traits>

#include "backend/cpu/matmul_quant_tile.h"

namespace llmctl::cpu {

constexpr int64_t kKQuantSuperBlock = 256;

template <class KQ>
struct KQuantTileAvx2;  // x86 only (below)

// Elements per activation scale trait KQ asks for (MatmulKernel::activation_group):
// KQ::kActivationGroup, else 32 (the block traits of matmul_quant_tile.h).
template <class KQ, class = void>
constexpr int kActivationGroupOf = 32;
template <class KQ>
constexpr int kActivationGroupOf<KQ, std::void_t<decltype(KQ::kActivationGroup)>> =
    KQ::kActivationGroup;

template <class KQ>
struct KQuantTileScalar {
  static_assert(kActivationGroupOf<KQ> == kKQuantSuperBlock, "one activation scale a super-block");
  template <int T>
  static void tile(const TileArgs& a, int n_rows) {
    const int64_t nb = a.n / 32, nsb = a.n / kKQuantSuperBlock;
    for (int r = 0; r < n_rows; ++r) {
      const uint8_t* row = a.w + static_cast<size_t>(r) * a.w_stride;
      for (int t = 0; t < T; ++t) {
        float acc = 0.0f;
        for (int64_t s = 0; s < nsb; ++s) {
          const int64_t b = t * nb + 8 * s;  // the super-block's first activation block
          acc = KQ::scalar_superblock(row + static_cast<size_t>(s) * KQ::kBytes,
                                      a.qs + t * a.n + kKQuantSuperBlock * s, a.qd[b], a.qsum + b,
                                      acc);
        }
        a.out[t * a.out_stride + r] = acc;
      }
    }
  }
};

#if defined(LLMCTL_HAVE_X86)
LLMCTL_AVX2 inline __m256i kq_load(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
LLMCTL_AVX2 inline void kq_store(uint8_t* p, __m256i v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v);
}
LLMCTL_AVX2 inline __m256i kq_bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// 16 bytes at `off` of each of the 8 rows, transposed: g[k] lane r = dword k of row r.
LLMCTL_AVX2 inline void kq_transpose16(const uint8_t* const rows[8], size_t off, __m256i g[4]) {
  __m256i v[4];
  for (int i = 0; i < 4; ++i) v[i] = load_two_rows(rows[i] + off, rows[i + 4] + off);
  transpose_dwords_4x4(v, g);
}

// 32 bytes at `off` of each row, transposed: g[s] lane r = bytes 4s..4s+3 of row r.
LLMCTL_AVX2 inline void kq_transpose32(const uint8_t* const rows[8], size_t off, __m256i g[8]) {
  kq_transpose16(rows, off, g);
  kq_transpose16(rows, off + 16, g + 4);
}

// The fp16 in the low (high == false) or high half of each dword lane, as 8 floats.
LLMCTL_AVX2 inline __m256 kq_fp16_lanes(__m256i g, bool high) {
  const __m256i pick =
      high ? _mm256_setr_epi8(2, 3, 6, 7, 10, 11, 14, 15, -1, -1, -1, -1, -1, -1, -1, -1, 2, 3, 6,
                              7, 10, 11, 14, 15, -1, -1, -1, -1, -1, -1, -1, -1)
           : _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1, 0, 1, 4, 5,
                              8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m256i h = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(g, pick), _MM_SHUFFLE(3, 1, 2, 0));
  return _mm256_cvtph_ps(_mm256_castsi256_si128(h));
}

// Whether KQ decodes one token's super-block straight from registers (decode_superblock).
template <class KQ, class = void>
constexpr bool kFusedDecode = false;
template <class KQ>
constexpr bool kFusedDecode<KQ, std::void_t<decltype(KQ::kFusedDecode)>> = KQ::kFusedDecode;

template <class KQ>
struct KQuantTileAvx2 {
  static constexpr size_t kPanelBlockBytes = KQ::kPanelBytes / 8;  // per 32-element block
  LLMCTL_AVX2 static void pack(const TileArgs& a, int n_rows, uint8_t* panel) {
    const uint8_t* rows[8];
    lane_tile_rows(a, n_rows, rows);
    for (int64_t s = 0; s < a.n / kKQuantSuperBlock; ++s)
      KQ::pack(rows, static_cast<size_t>(s) * KQ::kBytes,
               panel + static_cast<size_t>(s) * KQ::kPanelBytes);
  }

  template <int T>
  LLMCTL_AVX2 static void tile(const TileArgs& a, int n_rows) {
    const int64_t nsb = a.n / kKQuantSuperBlock;
    __m256 acc[static_cast<size_t>(T)];
    for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
    if (a.panel != nullptr) {
      for (int64_t s = 0; s < nsb; ++s)
        KQ::template superblock<T>(a.panel + static_cast<size_t>(s) * KQ::kPanelBytes, a, s, acc);
    } else {
      const uint8_t* rows[8];
      lane_tile_rows(a, n_rows, rows);
      const char* next_tile = reinterpret_cast<const char*>(a.w + 8 * a.w_stride);
      alignas(32) uint8_t record[KQ::kPanelBytes];
      for (int64_t s = 0; s < nsb; ++s) {
        const size_t off = static_cast<size_t>(s) * KQ::kBytes;
        if constexpr (T == 1) {
          // decode: the next tile's rows at the pace this tile is read (matmul_quant_tile.h),
          // into L2 as there (into L1: Q4_K 10 against 15 GB/s, Q6_K 9 against 14, one thread,
          // 2048x8192, weights as the GGUF has them, AVX-512 EPYC)
          for (size_t o = 0; o < 8 * KQ::kBytes; o += 64)
            _mm_prefetch(next_tile + 8 * off + o, _MM_HINT_T1);
        }
        if constexpr (T == 1 && kFusedDecode<KQ>) {
          KQ::decode_superblock(rows, off, a, s, acc);
        } else {
          KQ::pack(rows, off, record);
          KQ::template superblock<T>(record, a, s, acc);
        }
      }
    }
    for (int t = 0; t < T; ++t) store_lane_tile(a, n_rows, t, acc[t]);
  }
};
#endif

// Whether trait KQ reads TileArgs::qhalf (MatmulKernel::half_sums): KQ::kHalfSums.
template <class KQ, class = void>
constexpr bool kReadsHalfSums = false;
template <class KQ>
constexpr bool kReadsHalfSums<KQ, std::void_t<decltype(KQ::kHalfSums)>> = KQ::kHalfSums;

// Whether trait KQ reads TileArgs::qpair (MatmulKernel::pair_sums): KQ::kPairSums.
template <class KQ, class = void>
constexpr bool kReadsPairSums = false;
template <class KQ>
constexpr bool kReadsPairSums<KQ, std::void_t<decltype(KQ::kPairSums)>> = KQ::kPairSums;

// The activation arrays every kernel of trait KQ reads (its scalar, AVX2, AVX-512 and repacked
// kernels alike): MatmulKernel::half_sums, ::pair_sums and ::activation_group.
template <class KQ>
void set_kquant_activations(MatmulKernel& k) {
  k.half_sums = kReadsHalfSums<KQ>;
  k.pair_sums = kReadsPairSums<KQ>;
  k.activation_group = kActivationGroupOf<KQ>;
}

// The MatmulKernel of a K-quant type: AVX2 when asked for (and compiled for x86), else scalar.
template <class KQ>
MatmulKernel make_kquant_kernel(bool avx2, const char* avx2_name, const char* scalar_name) {
  static_assert(KQ::kTokens >= 1 && KQ::kTokens <= 8, "dispatch_quant_tile handles 1..8 tokens");
  MatmulKernel k = make_lane_kernel<KQuantTileScalar, KQuantTileAvx2, KQ>(
      avx2, avx2_name, scalar_name, KQ::kTokens);
  set_kquant_activations<KQ>(k);
  return k;
}

}  // namespace llmctl::cpu
