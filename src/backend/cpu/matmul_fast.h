#pragma once
// The CPU fast path for matrix products: every linear layer of the engine.
//
//   out (n_tokens, d) = x (n_tokens, n) @ W^T      W (d, n) = w.n_rows rows of w.n_cols
//
// W is read in place (ggml layout: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL,
// IQ4_XS, MXFP4, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K), or repacked (weight_repack.h). F32 and BF16
// weights are multiplied with the f32 activations directly, F16 weights with the activations
// rounded to f16 (as ggml does; a token whose values overflow f16 keeps f32); quantized weights are
// multiplied with the activations quantized to int8 per 32-element block (quantize_activations.h),
// as ggml does (vec_dot_q4_0_q8_0): integer dot products per block, one float multiply-add per
// block (K-quants: per 32-element sub-block, with the super-block's scales decoded once;
// matmul_kquant_tile.h). The K-quants and IQ4_XS, whose sub-block scales are integers, take one
// activation scale per 256 elements instead, as ggml's Q8_K: their float steps come once per
// super-block (MatmulKernel::activation_group).
//
// Threads take contiguous row ranges (ThreadPool's static partition). Within a range, a tile
// of R rows x T tokens keeps its accumulators in registers so each weight block loaded from
// memory serves T tokens; for prefill the tokens are walked in chunks whose activations stay
// in L2 while the thread's rows stream past. Quantized tiles put 8 rows in the SIMD lanes
// (matmul_quant_tile.h).
//
// INVARIANT (batch and thread invariance): out[t][r] is bit-identical whatever n_tokens is,
// wherever token t sits in the batch, and whatever the thread count. Every (row, token) pair
// sees the same instruction sequence in every tile shape:
//   float weights: one 8-lane accumulator, lane k adds fma(a_k, b_k, acc_k) block after block
//     in order; the lanes are then summed in one fixed order
//     (((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7))).
//   quantized weights: one float lane of the tile's accumulator (lanes are rows, never mixed),
//     fma(float(isum_b), d_w * d_x, acc) block after block in order (plus the min term of
//     Q4_1, Q5_1, Q2_K, Q4_K and Q5_K; K-quants super-block after super-block; the exact
//     sequences are in matmul_quant_tile.h and matmul_kquant_tile.h).
// The engine relies on this for "batched generation gives the same tokens as separate runs"
// and for prefix sharing. The portable scalar kernels follow the same arithmetic with
// std::fma, so they give the same bits as the AVX2 kernels (tested), on any CPU.

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/thread_pool.h"

namespace llmctl::cpu {

// Reusable buffers: after the first call with the largest shape, no allocation per call.
struct MatmulScratch {
  std::vector<int8_t> qs;     // (n_tokens, n) int8 activations
  std::vector<float> d;       // (n_tokens, n / 32) block scales
  std::vector<int32_t> sum;   // (n_tokens, n / 32) sum of each block's int8 activations
  std::vector<int32_t> half;  // (n_tokens, n / 32) its halves' sums (kernels with half_sums)
  std::vector<int32_t> pair;  // (n_tokens, n / 64) two blocks' sums (kernels with pair_sums)
  std::vector<int32_t> off;   // (n_tokens, n / 32) -sum_offset * sum (kernels with sum_offset)
  std::vector<float> sumd;    // (n_tokens, n / 32) float(sum) * d (kernels with sum_scaled)
  std::vector<uint16_t> xh;   // (n_tokens, n) f16 activations (F16 weights)
  std::vector<uint8_t> fits;  // (n_tokens,) 1: the token's activations fit f16 (xh is used)
  std::vector<float> xr;      // (n_tokens, n) f16-rounded activations as f32 (halves_widened)
};

// How quantized and F16 weights meet the activations.
//   Fast   int8 activations per 32-element block for Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL
//          and MXFP4, per 256-element super-block for the K-quants (Q2_K, Q3_K, Q4_K, Q5_K,
//          Q6_K) and IQ4_XS, f16 activations for F16 weights (as ggml does); the other dtypes
//          as below.
//   Float  every weight row decoded to f32 (quantized: a tile at a time, matmul_kernel_dequant;
//          F16: widened in the F32 tile) and multiplied with the f32 activations: no rounding of
//          the activations, so a result moves continuously with its inputs, as the reference's
//          does (rope-probe measures RoPE with it: int8 activations turn a 1-ulp change of q
//          into whole quantization steps downstream). Slower: Q4_1 prefill about 1.2x on
//          SmolLM2 (rope-probe's shift probe, one thread).
// Batch and thread invariance hold in both.
enum class MatmulPrecision { Fast, Float };

// Which instruction set the kernels use. Auto picks Avx512 when cpu_features() has AVX2, FMA,
// F16C and AVX-512 F/BW/VL/DQ/VNNI (matmul_fast_has_avx512()), else Avx2 when it has AVX2,
// FMA and F16C, else Scalar; the environment variable LLMCTL_MATMUL_ISA (scalar, avx2,
// avx512 or auto; read once) overrides that choice for the whole process (benchmarks, tests;
// an instruction set the CPU lacks is an Error at the first matmul). Avx512 runs an AVX-512
// kernel where the dtype has one (matmul_kernel_*_avx512) and the AVX2 kernel otherwise. The
// kernels of every instruction set give the scalar kernel's bits (the invariant above), so
// the choice changes the speed only. No kernel issues AMX instructions. The fast backend's
// attention follows the same choice (its AVX-512 loops under Avx512 only).
enum class MatmulIsa { Auto, Scalar, Avx2, Avx512 };

// x row-major (n_tokens, w.n_cols), out row-major (n_tokens, w.n_rows); n_tokens >= 1.
// Throws Error for an unsupported dtype, a row length that is not a whole number of blocks,
// or n_tokens < 1. out must not alias x.
// repacked: w's rows as repack_weight() wrote them (weight_repack.h), read instead of w.data
// (which is not touched); only where repack_supported(w.type, isa) and precision is Fast
// (else an Error). The same bits as without.
void matmul_fast(const WeightView& w, const float* x, int64_t n_tokens, float* out,
                 ThreadPool& pool, MatmulScratch& scratch,
                 MatmulPrecision precision = MatmulPrecision::Fast,
                 const uint8_t* repacked = nullptr);

// The same with the instruction set chosen by the caller (tests, benchmarks). Throws Error
// when Avx2 (Avx512) is asked for on a CPU without what matmul_fast_has_avx2() (_avx512())
// requires.
void matmul_fast_isa(MatmulIsa isa, const WeightView& w, const float* x, int64_t n_tokens,
                     float* out, ThreadPool& pool, MatmulScratch& scratch,
                     MatmulPrecision precision = MatmulPrecision::Fast,
                     const uint8_t* repacked = nullptr);

// One weight of matmul_fast_shared: out (n_tokens, w->n_rows) = x @ w^T (repacked as above).
struct MatmulJob {
  const WeightView* w = nullptr;
  float* out = nullptr;
  const uint8_t* repacked = nullptr;
};
constexpr int kMaxSharedMatmuls = Backend::kMaxSharedMatmuls;

// The products of one input with 1 to kMaxSharedMatmuls weights of the same row length
// (attention's q, k and v; the feed-forward's gate and up) as one op: x converted once per
// distinct activation format (int8 blocks, f16; weights of one type share one), then every row
// of every weight in one hand-off to the pool (decode: each thread its matmul_fast share of each
// weight). Each output has the bits matmul_fast gives it. scratch: count of them (job j's
// conversion goes to scratch[j] unless an earlier job's serves it). The outputs must not alias
// x or each other (an Error if two are the same).
void matmul_fast_shared(const MatmulJob* jobs, int count, const float* x, int64_t n_tokens,
                        ThreadPool& pool, MatmulScratch* scratch,
                        MatmulPrecision precision = MatmulPrecision::Fast,
                        MatmulIsa isa = MatmulIsa::Auto);

// The kernel matmul_fast runs for `type` on this CPU, e.g. "q4_0 avx512-vnni", "q4_0 avx2" or
// "f16 scalar"; "unsupported" for a dtype it cannot multiply. With isa: the kernel
// matmul_fast_isa(isa, ...) runs (Auto: as matmul_fast). repacked: the kernel over repacked
// weights where the isa has one (e.g. "q4_k avx512-vnni repacked-x8"), else as without.
const char* matmul_fast_kernel_name(GgmlType type,
                                    MatmulPrecision precision = MatmulPrecision::Fast);
const char* matmul_fast_kernel_name(GgmlType type, MatmulIsa isa,
                                    MatmulPrecision precision = MatmulPrecision::Fast,
                                    bool repacked = false);

// Whether matmul_fast multiplies `type` weights with int8 activations (integer dot products:
// VNNI dpbusd, AVX2 maddubs, their scalar equivalent) rather than with f32 FMAs (F32, F16,
// BF16, a dtype read through the dequantizing kernel, and every dtype in the Float precision).
// `llmctl bench` puts prefill against the int8 or the f32 peak by it (compute_probe.h).
bool matmul_fast_int8_activations(GgmlType type,
                                  MatmulPrecision precision = MatmulPrecision::Fast);

// Whether this CPU runs the AVX2 kernels (AVX2, FMA and F16C).
bool matmul_fast_has_avx2();
// Whether this CPU runs the AVX-512 kernels: the AVX2 set plus AVX-512 F, BW, VL, DQ and VNNI.
bool matmul_fast_has_avx512();
// What Auto resolves to in this process (LLMCTL_MATMUL_ISA, else the CPU's best); never Auto.
MatmulIsa matmul_fast_auto_isa();
// "scalar", "avx2", "avx512", "auto".
const char* matmul_isa_name(MatmulIsa isa);

}  // namespace llmctl::cpu
