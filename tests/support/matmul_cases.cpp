#include "support/matmul_cases.h"

#include <catch2/catch.hpp>
#include <cstring>

#include "backend/cpu/thread_pool.h"
#include "backend/cpu/weight_repack.h"
#include "quant/quantize.h"
#include "support/random_data.h"

namespace llmctl::test {

using namespace llmctl::cpu;

bool is_quantized(GgmlType t) {
  return t == GgmlType::Q8_0 || t == GgmlType::Q4_0 || t == GgmlType::Q4_1 || t == GgmlType::Q5_0 ||
         t == GgmlType::Q5_1 || t == GgmlType::IQ4_NL || t == GgmlType::IQ4_XS ||
         t == GgmlType::Q2_K || t == GgmlType::Q3_K || t == GgmlType::Q4_K ||
         t == GgmlType::Q5_K || t == GgmlType::Q6_K || t == GgmlType::MXFP4;
}

bool has_min(GgmlType t) { return t == GgmlType::Q4_1 || t == GgmlType::Q5_1; }

bool is_half(GgmlType t) { return t == GgmlType::F16; }

std::vector<MatmulIsa> isas() {
  std::vector<MatmulIsa> v{MatmulIsa::Scalar};
  if (matmul_fast_has_avx2()) v.push_back(MatmulIsa::Avx2);
  if (matmul_fast_has_avx512()) v.push_back(MatmulIsa::Avx512);
  return v;
}

Weight make_weight(GgmlType type, int64_t d, int64_t n, std::mt19937& rng) {
  Weight w{type, d, n, {}};
  w.bytes.resize(w.row_bytes() * static_cast<size_t>(d));
  if (!can_quantize(type)) {
    w.bytes = test::random_blocks(type, static_cast<size_t>(d * n), rng);
    return w;
  }
  std::normal_distribution<float> dist(has_min(type) ? 0.5f : 0.0f, 1.0f);
  std::vector<float> row(static_cast<size_t>(n));
  for (int64_t r = 0; r < d; ++r) {
    for (float& v : row) v = r == 2 ? 0.0f : dist(rng);
    quantize_row(type, row.data(), w.bytes.data() + static_cast<size_t>(r) * w.row_bytes(), n);
  }
  if (type == GgmlType::Q8_0)
    for (size_t i = 2; i < w.bytes.size(); i += 34 * 3 + 5)
      if (i % 34 >= 2) w.bytes[i] = 0x80;
  return w;
}

std::vector<float> make_x(int64_t n_tokens, int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n_tokens * n));
  for (float& v : x) v = dist(rng);
  if (n >= 64)
    for (int64_t j = 32; j < 64; ++j) x[static_cast<size_t>(j)] = 0.0f;
  return x;
}

std::vector<float> run(MatmulIsa isa, const Weight& w, const std::vector<float>& x,
                       int64_t n_tokens, int n_threads, MatmulPrecision precision, bool repacked) {
  ThreadPool pool(n_threads);
  MatmulScratch scratch;
  std::vector<float> out(static_cast<size_t>(n_tokens * w.d), -1.0f);
  const RepackedWeight copy = repacked ? repack_weight(w.view(), pool) : RepackedWeight{};
  matmul_fast_isa(isa, w.view(), x.data(), n_tokens, out.data(), pool, scratch, precision,
                  repacked ? copy.data() : nullptr);
  return out;
}

Weight decoded(const Weight& w) {
  Weight f{GgmlType::F32, w.d, w.n, {}};
  f.bytes.resize(static_cast<size_t>(w.d * w.n) * 4);
  for (int64_t r = 0; r < w.d; ++r)
    std::memcpy(f.bytes.data() + static_cast<size_t>(r * w.n) * 4, w.row(r).data(),
                static_cast<size_t>(w.n) * 4);
  return f;
}

bool same_bits(const float* a, const float* b, int64_t count) {
  return std::memcmp(a, b, static_cast<size_t>(count) * sizeof(float)) == 0;
}

int64_t n_for(GgmlType type, int i) {
  static const int64_t quant[] = {32, 96, 288, 1056};
  static const int64_t flt[] = {1, 13, 100, 1059};
  static const int64_t k_quant[] = {256, 512, 768, 1280};
  const uint32_t block = ggml_traits(type).block_size;
  return block == 256 ? k_quant[i] : block == 32 ? quant[i] : flt[i];
}

// Every dtype and shape: the scalar kernel's bits from the SIMD kernel of `isa`, on 2 threads
// (tile heights 1..4, 8 and 16 with row tails: 29 rows; decode and prefill tiles).
void check_scalar_bits(MatmulIsa isa) {
  std::mt19937 rng(5);
  for (GgmlType type : kTypes) {
    for (int ni = 0; ni < 4; ++ni) {
      const int64_t n = n_for(type, ni);
      const Weight w = make_weight(type, 29, n, rng);
      for (int64_t n_tokens : {1, 3, 8, 64}) {
        const std::vector<float> x = make_x(n_tokens, n, rng);
        INFO(ggml_type_name(type) << " n=" << n << " n_tokens=" << n_tokens << " kernel "
                                  << matmul_fast_kernel_name(type, isa));
        CHECK(same_bits(run(MatmulIsa::Scalar, w, x, n_tokens, 1).data(),
                        run(isa, w, x, n_tokens, 2).data(), 29 * n_tokens));
      }
    }
  }
}

void check_repacked_bits(MatmulIsa isa) {
  std::mt19937 rng(7);
  const std::vector<GgmlType> types = {
      GgmlType::Q4_K, GgmlType::Q5_K,   GgmlType::Q6_K, GgmlType::Q3_K, GgmlType::IQ4_XS,
      GgmlType::Q2_K, GgmlType::Q4_0,   GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
      GgmlType::Q8_0, GgmlType::IQ4_NL, GgmlType::MXFP4};
  for (GgmlType type : types) {
    REQUIRE(repack_supported(type, isa));
    for (int64_t d : {1, 7, 8, 9, 15, 16, 17, 29, 33, 40}) {
      for (int ni : {0, 2}) {
        const int64_t n = n_for(type, ni);
        // quantized normal values, and random bytes (every scale, min and high-bit pattern)
        for (bool random : {false, true}) {
          const Weight w =
              random ? Weight{type, d, n, random_blocks(type, static_cast<size_t>(d * n), rng)}
                     : make_weight(type, d, n, rng);
          // 3, 9, 23, 31: the small batches' tiles from the records (MatmulKernel::
          // pack_min_tokens: AVX-512 24, AVX2 32); 24, 33: through the panel
          for (int64_t n_tokens : {1, 3, 9, 23, 24, 31, 33}) {
            const std::vector<float> x = make_x(n_tokens, n, rng);
            const int threads = 1 + static_cast<int>(d % 3);
            INFO(ggml_type_name(type) << " " << matmul_isa_name(isa) << " repacked d=" << d
                                      << " n=" << n << " random=" << random
                                      << " n_tokens=" << n_tokens << " threads=" << threads);
            CHECK(same_bits(
                run(MatmulIsa::Scalar, w, x, n_tokens, 1).data(),
                run(isa, w, x, n_tokens, threads, MatmulPrecision::Fast, true).data(),
                d * n_tokens));
          }
        }
      }
    }
  }
}

}  // namespace llmctl::test
