#pragma once
// Shared by the CPU matmul tests (test_cpu_matmul_fast.cpp: against a float64 reference and
// batch/thread invariance; test_cpu_matmul_isa.cpp: every instruction set against the scalar
// kernel): the dtypes, test weights and activations, and one matmul_fast call.

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/matmul_fast.h"
#include "core/ggml_type.h"
#include "quant/dequant.h"

namespace llmctl::test {

inline constexpr GgmlType kTypes[] = {GgmlType::F32,    GgmlType::F16,    GgmlType::BF16, GgmlType::Q8_0,
                           GgmlType::Q4_0,   GgmlType::Q4_1,   GgmlType::Q5_0, GgmlType::Q5_1,
                           GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::Q2_K, GgmlType::Q3_K,
                           GgmlType::Q4_K,   GgmlType::Q5_K,   GgmlType::Q6_K, GgmlType::MXFP4};

// Whether the kernel multiplies int8-quantized activations (the integer kernels).
bool is_quantized(GgmlType t);
// Whether the weight has a per-block min (w = q * d + m): Q4_1, Q5_1.
bool has_min(GgmlType t);
// Whether the kernel multiplies f16-rounded activations (F16 weights, matmul_kernels.h).
bool is_half(GgmlType t);
// Scalar, and AVX2 and AVX-512 where this CPU has them.
std::vector<cpu::MatmulIsa> isas();

// A weight (d, n) of `type`: normal values (plus an offset for Q4_1, Q5_1 so the min matters), a
// row of zeros, and for Q8_0 some q = -128 (valid in a file, never written by the quantizer).
// Types quantize_row does not write (Q2_K, Q3_K, IQ4_*) get random bytes with small scales.
struct Weight {
  GgmlType type;
  int64_t d, n;
  std::vector<uint8_t> bytes;
  WeightView view() const { return WeightView{"w", type, n, d, bytes.data()}; }
  std::vector<float> row(int64_t r) const {  // dequantized
    std::vector<float> v(static_cast<size_t>(n));
    dequantize_row(type, bytes.data() + static_cast<size_t>(r) * row_bytes(), v.data(), n);
    return v;
  }
  size_t row_bytes() const {
    const GgmlTypeTraits tr = ggml_traits(type);
    return static_cast<size_t>(n) / tr.block_size * tr.type_size;
  }
};

Weight make_weight(GgmlType type, int64_t d, int64_t n, std::mt19937& rng);
// Activations (n_tokens, n): normal values, with one all-zero 32-block in token 0.
std::vector<float> make_x(int64_t n_tokens, int64_t n, std::mt19937& rng);
// out (n_tokens x d) of matmul_fast_isa on n_threads; repacked: from the weight repacked by
// repack_weight() (weight_repack.h), as the fast CPU backend multiplies it.
std::vector<float> run(cpu::MatmulIsa isa, const Weight& w, const std::vector<float>& x,
                       int64_t n_tokens, int n_threads,
                       cpu::MatmulPrecision precision = cpu::MatmulPrecision::Fast,
                       bool repacked = false);
// The weight decoded to F32 (the same values the dequantizing kernel multiplies).
Weight decoded(const Weight& w);
bool same_bits(const float* a, const float* b, int64_t count);
// Row lengths i = 0..3 of a dtype: not multiples of 256 (nor 8 for floats).
int64_t n_for(GgmlType type, int i);
// Every dtype and shape: the scalar kernel's bits from the SIMD kernel of `isa`, on 2 threads.
void check_scalar_bits(cpu::MatmulIsa isa);
// The repacked kernels of `isa` (Q4_K, Q5_K, Q6_K, Q3_K, IQ4_XS, Q2_K, Q4_0, Q4_1, Q5_0, Q5_1,
// Q8_0; Avx2, Avx512) against the scalar kernel: row counts around the 8- and 16-row groups and
// tiles, decode and prefill, 1 to 3 threads.
void check_repacked_bits(cpu::MatmulIsa isa);

}  // namespace llmctl::test
