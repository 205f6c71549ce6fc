#pragma once
// Internal to the matmul fast path (matmul_fast.h): the tile kernel interface each dtype file
// implements, and the lane arithmetic the AVX2 and scalar kernels share.
//
// A tile kernel computes out[t][r] for R rows x T tokens. Float weights (1 <= R, T <= kMaxTile):
// each pair (r, t) owns 8 float lanes; lane k accumulates in order over the row
//   acc_k = fma(w[i + k], x[i + k], acc_k)         for i = 0, 8, 16, ...
//   (past the end of the row w = x = 0), then out = hsum8(acc).
// F16 weights multiply f16 activations (MatmulKernel::half_activations): x is x rounded to
// f16 (round to nearest even) for every token whose values all fit (|x| < 65520, finite), and
// the f32 x for a token that does not (tile_wide), so a token's bits depend on its own values
// only. Half-width activations halve the bytes the tile streams from L2 per FMA.
// Quantized weights (up to 8 rows, rows as SIMD lanes): one scalar chain per pair over the
// 32-element blocks, acc = fma(float(isum_b), d_w * d_x, acc) with the block's exact integer
// dot product isum_b (Q4_1 and Q5_1 add their min term per block); matmul_quant_tile.h has the
// details, matmul_kquant_tile.h those of the K-quants and IQ4_XS (exact integer sums over each
// 256-element super-block against one activation scale per super-block, one chain step per
// super-block).
//
// Every float product that feeds a sum is written as an explicit fma (std::fma, fmadd
// intrinsics) and no float expression has the shape a * b + c: GCC contracts such
// expressions into fma by default (-ffp-contract=fast, also for intrinsics), differently
// with and without FMA in the target, which would make the AVX2 and scalar bits differ.

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <utility>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define LLMCTL_HAVE_X86 1
#define LLMCTL_AVX2 __attribute__((target("avx2,fma,f16c")))
// The AVX-512 kernels (matmul_fast_has_avx512()): a superset of LLMCTL_AVX2, so they inline
// the AVX2 helpers. Function attributes, never -m flags: the rest of the binary stays
// runnable on AVX2-only CPUs.
#define LLMCTL_AVX512 \
  __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() (a self-initialised variable),
// which -W(maybe-)uninitialized reports once they are inlined: a false positive. The AVX-512
// kernels sit between these two.
#define LLMCTL_AVX512_BEGIN                                          \
  _Pragma("GCC diagnostic push")                                     \
      _Pragma("GCC diagnostic ignored \"-Wmaybe-uninitialized\"") \
          _Pragma("GCC diagnostic ignored \"-Wuninitialized\"")
#define LLMCTL_AVX512_END _Pragma("GCC diagnostic pop")
#endif

#include "core/ggml_type.h"

namespace llmctl::cpu {

constexpr int kMaxTile = 4;

struct TileArgs {
  const uint8_t* w;  // first row of the tile
  size_t w_stride;   // bytes from one row to the next (repacked: MatmulKernel::repacked)
  int64_t n;         // row length in elements
  // Activations of the tile's first token; the next token is one stride further.
  const float* x;       // f32 (float kernels), stride n
  const uint16_t* xh;   // f16 (kernels with half_activations), stride n
  const int8_t* qs;     // int8 (quantized kernels), stride n
  const float* qd;      // block scales, stride n / 32 (MatmulKernel::activation_group)
  const int32_t* qsum;  // per block: sum of the block's int8 activations, stride n / 32
  // per block: the sums of its two 16-element halves, xa | xb << 16 (activation_half_sums),
  // stride n / 32; only for a kernel with MatmulKernel::half_sums (else nullptr)
  const int32_t* qhalf;
  // per two blocks: their sums, qsum[2 p] | qsum[2 p + 1] << 16 (activation_pair_sums), stride
  // n / 64; only for a kernel with MatmulKernel::pair_sums (else nullptr)
  const int32_t* qpair;
  // per block, stride n / 32, computed once per call for the kernels that ask for them
  // (MatmulKernel::sum_offset, ::sum_scaled; else nullptr), so that a tile loads what it would
  // otherwise compute per row group: -sum_offset * qsum (exact in int32), and
  // float(qsum) * qd (the same single rounding as the tile's own product).
  const int32_t* qoff;
  const float* qsumd;
  float* out;           // out[t * out_stride + r]
  int64_t out_stride;   // d (the weight's row count)
  GgmlType type;        // the weight's dtype (the dequantizing kernel decodes rows with it)
  uint64_t call_id;     // distinct per matmul_fast call (keys the dequantized-row cache)
  // Quantized prefill: the tile's rows as MatmulKernel::pack left them (nullptr: read w).
  const uint8_t* panel;
  // The 16-row repacked tiles (matmul_repacked_quant_tile*.h), reading records: how far ahead
  // of each record to prefetch into L2, in bytes; 0: not at all. decode_prefetch_bytes().
  size_t prefetch;
};

// Software prefetch of the repacked tiles' record streams, into L2 (prefetcht1; the hardware
// L1 prefetcher fills L1 from there), by layout and CPU. tools/bench_matmul, one thread,
// 2048x8192 and 8192x2048, decode GB/s:
//  - the 8-row K-quant records (matmul_repacked_tile*.h): kKQuantPrefetchBytes ahead on every
//    CPU. AVX-512 EPYC (Zen 4): Q4_K 14 to 19 GB/s two records ahead into L1, 22 to 27 at 6144
//    bytes into L2 (4096 and 8192 between), Q3_K and Q6_K 7 to 12 without any. AVX-512 Xeon
//    (2026-12-07): 6144 as good as 4096 and 8192, Q4_K / Q6_K 12.7 / 13.6 against 10 at 1024.
//  - the 16-row block records (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4): the same distance
//    on Intel, none on AMD, where the records' one sequential stream per 16 rows is left to the
//    hardware prefetchers. EPYC: 4096 bytes ahead into L2 cost one core up to a third (Q4_0 /
//    Q4_1 about 21 against 27 to 30 GB/s), 2048 lost half on AVX2, none never lost. Xeon:
//    none left one core at 9.4 to 10.4 GB/s (Q4_0, Q5_0, IQ4_NL; Q8_0 13.9), 6144 ahead gives
//    13 to 15, AVX2 1.3x to 1.5x alike, and 2-token to 8-token batches 1.25x to 1.8x at two threads
//    (they read the records too); end to end the 1B Q4_0 decode 1.2x to 1.37x (BENCHMARKS.md,
//    2026-12-07).
constexpr size_t kKQuantPrefetchBytes = 6144;
// TileArgs::prefetch for this CPU.
size_t decode_prefetch_bytes();

#if defined(LLMCTL_HAVE_X86)
// Prefetches [p, p + bytes) into L2, a line at a time.
inline void prefetch_l2(const void* p, size_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (size_t o = 0; o < bytes; o += 64) _mm_prefetch(c + o, _MM_HINT_T1);
}
#endif

// The same tile from its token k on: every per-token array that is set (and out) k tokens
// further. For a tile that runs its tokens in smaller groups.
inline TileArgs tile_args_from_token(const TileArgs& a, int64_t k) {
  const int64_t nb = a.n / 32;
  TileArgs r = a;
  if (a.x != nullptr) r.x = a.x + k * a.n;
  if (a.xh != nullptr) r.xh = a.xh + k * a.n;
  if (a.qs != nullptr) r.qs = a.qs + k * a.n;
  if (a.qd != nullptr) r.qd = a.qd + k * nb;
  if (a.qsum != nullptr) r.qsum = a.qsum + k * nb;
  if (a.qhalf != nullptr) r.qhalf = a.qhalf + k * nb;
  if (a.qpair != nullptr) r.qpair = a.qpair + k * (nb / 2);
  if (a.qoff != nullptr) r.qoff = a.qoff + k * nb;
  if (a.qsumd != nullptr) r.qsumd = a.qsumd + k * nb;
  r.out = a.out + k * a.out_stride;
  return r;
}

using TileFn = void (*)(const TileArgs& a, int n_rows, int n_tokens);
// Rearranges the tile's n_rows rows (a.w) once into panel (panel_bytes_per_block x n / 32 bytes)
// for the token tiles that follow; the tile then reads a.panel instead of a.w, with the same
// result.
using PackFn = void (*)(const TileArgs& a, int n_rows, uint8_t* panel);

// One dtype's kernel and the tile shapes it is fast with.
struct MatmulKernel {
  const char* name = "unsupported";  // "q4_0 avx2"
  TileFn tile = nullptr;
  bool quantized = false;  // reads qs/qd instead of x
  bool half_sums = false;  // reads qhalf too (the 16-element sub-block K-quants)
  bool pair_sums = false;  // reads qpair too (Q4_K, Q5_K, IQ4_XS)
  int32_t sum_offset = 0;  // non-zero: reads qoff (= -sum_offset * qsum)
  bool sum_scaled = false;  // reads qsumd (= float(qsum) * qd)
  // Elements per activation scale: 32, or 256 for the K-quants and IQ4_XS, whose sub-block
  // scales are integers (float steps once per super-block, not per block). qd keeps one
  // entry per 32-element block either way; with 256 the 8 blocks of a super-block share it.
  int activation_group = 32;
  // Reads xh instead of x, except for the tokens whose activations overflow f16: tile_wide,
  // the same tile over x, multiplies those (one token per call).
  bool half_activations = false;
  TileFn tile_wide = nullptr;
  // With half_activations: tile_wide runs every token, over the f16-rounded values widened back
  // to f32 (the same numbers, so the same bits as tile over xh; an overflowing token's own x).
  // The AVX-512 tile then broadcasts activations from memory instead of converting each one
  // once per row tile, which costs more on its FMA ports than the doubled bytes cost in L2.
  bool halves_widened = false;
  int rows_decode = 4;   // R for n_tokens == 1
  int rows_prefill = 2;  // R x T for n_tokens > 1
  int tokens_prefill = 4;
  // Prefill order. false: token chunks (L2) outer, each row tile read once per chunk and
  // packed if pack is set. true: blocks of rows (L2) outer, every token tile in turn against
  // the block's row tiles (float kernels reading rows in place).
  bool row_blocks = false;
  PackFn pack = nullptr;             // prefill only; nullptr: tiles read the weights in place
  size_t panel_bytes_per_block = 0;  // per 32-element block of a row tile
  // Packs only for a token chunk of at least this many tokens; a smaller one's tiles read the
  // weights (a.panel == nullptr, the same bits): there the pass costs more than it saves.
  int64_t pack_min_tokens = 0;
  // A packed chunk also holds as many tokens as fill half of the core's L2 (matmul_blocking.h's
  // chunk_tokens): the AVX-512 tiles gain from fewer packs; the AVX2 ones, tried on
  // the same Xeon, did not (Q6_K 0.92x to 0.96x).
  bool pack_fills_l2 = false;
  // Reads the weight repacked (weight_repack.h), not the GGUF rows: TileArgs::w is then the
  // repacked copy and w_stride a group's bytes over its rows (repack_group_rows()).
  bool repacked = false;
};

// Per-dtype kernels (matmul_f32.cpp, matmul_f16.cpp, matmul_q8_0.cpp, matmul_q4_0.cpp,
// matmul_q4_1.cpp, matmul_q5_0.cpp, matmul_q5_1.cpp, matmul_iq4_nl.cpp, matmul_iq4_xs.cpp,
// matmul_mxfp4.cpp, matmul_q2_k.cpp ... matmul_q6_k.cpp). avx2 == false gives the portable scalar kernel.
MatmulKernel matmul_kernel_f32(bool avx2);
MatmulKernel matmul_kernel_f16(bool avx2);
MatmulKernel matmul_kernel_bf16(bool avx2);
MatmulKernel matmul_kernel_q8_0(bool avx2);
MatmulKernel matmul_kernel_q4_0(bool avx2);
MatmulKernel matmul_kernel_q4_1(bool avx2);
MatmulKernel matmul_kernel_q5_0(bool avx2);
MatmulKernel matmul_kernel_q5_1(bool avx2);
MatmulKernel matmul_kernel_iq4_nl(bool avx2);
MatmulKernel matmul_kernel_iq4_xs(bool avx2);
MatmulKernel matmul_kernel_mxfp4(bool avx2);
// K-quants against int8 activations (matmul_kquant_tile.h; matmul_q2_k.cpp, matmul_q3_k.cpp,
// matmul_q4_k.cpp, matmul_q5_k.cpp, matmul_q6_k.cpp).
MatmulKernel matmul_kernel_q2_k(bool avx2);
MatmulKernel matmul_kernel_q3_k(bool avx2);
MatmulKernel matmul_kernel_q4_k(bool avx2);
MatmulKernel matmul_kernel_q5_k(bool avx2);
MatmulKernel matmul_kernel_q6_k(bool avx2);
// AVX-512 kernels, only for a CPU with matmul_fast_has_avx512(); same bits as the scalar
// kernels. Where a dtype has none, matmul_fast runs its AVX2 kernel.
MatmulKernel matmul_kernel_f32_avx512();
MatmulKernel matmul_kernel_f16_avx512();
MatmulKernel matmul_kernel_bf16_avx512();
MatmulKernel matmul_kernel_q8_0_avx512();
MatmulKernel matmul_kernel_q4_0_avx512();
MatmulKernel matmul_kernel_q4_1_avx512();
// 16-row VNNI prefill tiles over the AVX2 kernels' packing, AVX2 decode tiles
// (matmul_paired_tile_avx512.h).
MatmulKernel matmul_kernel_q2_k_avx512();
MatmulKernel matmul_kernel_q3_k_avx512();
MatmulKernel matmul_kernel_q4_k_avx512();
MatmulKernel matmul_kernel_q5_k_avx512();
MatmulKernel matmul_kernel_q6_k_avx512();
MatmulKernel matmul_kernel_q5_0_avx512();
MatmulKernel matmul_kernel_q5_1_avx512();
MatmulKernel matmul_kernel_iq4_nl_avx512();
MatmulKernel matmul_kernel_iq4_xs_avx512();
MatmulKernel matmul_kernel_mxfp4_avx512();
// AVX-512 kernels over repacked weights (weight_repack.h, matmul_repacked_tile.h): VNNI decode
// from the pre-transposed records, 16-row prefill tiles as above.
MatmulKernel matmul_kernel_q4_k_repacked();
MatmulKernel matmul_kernel_q5_k_repacked();
MatmulKernel matmul_kernel_q6_k_repacked();
MatmulKernel matmul_kernel_q3_k_repacked();
MatmulKernel matmul_kernel_iq4_xs_repacked();
MatmulKernel matmul_kernel_q2_k_repacked();
// The same for the 32-element block types (16-row groups; matmul_repacked_quant_tile.h): one
// tile reads the group's sequential stream for decode and prefill.
MatmulKernel matmul_kernel_q4_0_repacked();
MatmulKernel matmul_kernel_q4_1_repacked();
MatmulKernel matmul_kernel_q5_0_repacked();
MatmulKernel matmul_kernel_q5_1_repacked();
MatmulKernel matmul_kernel_q8_0_repacked();
MatmulKernel matmul_kernel_iq4_nl_repacked();
MatmulKernel matmul_kernel_mxfp4_repacked();
// AVX2 kernels over the repacked K-quants (matmul_repacked_tile_avx2.h): 8-row decode tiles
// reading the records, prefill tiles over the in-place kernels' panels unpacked from them.
MatmulKernel matmul_kernel_q4_k_repacked_avx2();
MatmulKernel matmul_kernel_q5_k_repacked_avx2();
MatmulKernel matmul_kernel_q6_k_repacked_avx2();
MatmulKernel matmul_kernel_q3_k_repacked_avx2();
MatmulKernel matmul_kernel_iq4_xs_repacked_avx2();
MatmulKernel matmul_kernel_q2_k_repacked_avx2();
// The same for the 32-element block types (16-row groups; matmul_repacked_quant_tile_avx2.h):
// 16-row decode tiles reading the records, prefill one 8-row half of the record at a time.
MatmulKernel matmul_kernel_q4_0_repacked_avx2();
MatmulKernel matmul_kernel_q4_1_repacked_avx2();
MatmulKernel matmul_kernel_q5_0_repacked_avx2();
MatmulKernel matmul_kernel_q5_1_repacked_avx2();
MatmulKernel matmul_kernel_q8_0_repacked_avx2();
MatmulKernel matmul_kernel_iq4_nl_repacked_avx2();
MatmulKernel matmul_kernel_mxfp4_repacked_avx2();
// Any type dequantize_row() decodes (MatmulPrecision::Float, and any type without an integer
// kernel): each row of the tile is dequantized to f32 (quant/dequant.h) and multiplied by the
// F32 kernel, so the result is bit-identical to the F32 kernel on the dequantized weight, with
// its batch and thread invariance (matmul_dequant.cpp). A tile's rows stay decoded while its
// token tiles pass.
MatmulKernel matmul_kernel_dequant(GgmlType type, bool avx2);

// ---------------------------------------------------------------------------
// Tile tables: K::tile<R, T>(args) for every 1 <= R, T <= kMaxTile behind one TileFn
// ---------------------------------------------------------------------------
template <class K, int R, int T>
void tile_entry(const TileArgs& a) {
  K::template tile<R, T>(a);
}

template <class K, size_t... I>
constexpr std::array<void (*)(const TileArgs&), sizeof...(I)> make_tile_table(
    std::index_sequence<I...>) {
  return {
      &tile_entry<K, static_cast<int>(I) / kMaxTile + 1, static_cast<int>(I) % kMaxTile + 1>...};
}

template <class K>
void dispatch_tile(const TileArgs& a, int n_rows, int n_tokens) {
  static constexpr auto table =
      make_tile_table<K>(std::make_index_sequence<size_t{kMaxTile} * kMaxTile>());
  table[static_cast<size_t>((n_rows - 1) * kMaxTile + (n_tokens - 1))](a);
}

// ---------------------------------------------------------------------------
// Scalar lane arithmetic (the portable kernels; same results as the AVX2 lanes)
// ---------------------------------------------------------------------------
// ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)): the order of hsum8_avx2.
inline float hsum8_scalar(const float* l) {
  const float v0 = l[0] + l[4], v1 = l[1] + l[5], v2 = l[2] + l[6], v3 = l[3] + l[7];
  return (v0 + v2) + (v1 + v3);
}

#if defined(LLMCTL_HAVE_X86)
// ---------------------------------------------------------------------------
// AVX2 helpers
// ---------------------------------------------------------------------------
LLMCTL_AVX2 inline float hsum8_avx2(__m256 a) {
  const __m128 v = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  const __m128 u = _mm_add_ps(v, _mm_movehl_ps(v, v));  // u0 = v0 + v2, u1 = v1 + v3
  return _mm_cvtss_f32(_mm_add_ss(u, _mm_movehdup_ps(u)));
}

#endif

}  // namespace llmctl::cpu
