// The CPU matmul kernels of each instruction set against the scalar kernel, bit for bit
// (src/backend/cpu/matmul_kernels.h: one arithmetic contract for every dtype); AVX2 and
// AVX-512 are skipped, with a warning, on a CPU without them. Kernel names, bad arguments.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "backend/cpu/cpu_fast_backend.h"
#include "backend/cpu/matmul_fast.h"
#include "backend/cpu/thread_pool.h"
#include "backend/cpu/weight_repack.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "quant/dequant.h"
#include "support/backend_buffers.h"
#include "support/matmul_cases.h"
#include "support/random_data.h"
#include "support/test_data.h"

using namespace llmctl;
using namespace llmctl::cpu;
using namespace llmctl::test;

TEST_CASE("matmul_fast: the scalar fallback gives the AVX2 kernel's bits", "[cpu]") {
  if (!matmul_fast_has_avx2()) {
    WARN("this CPU has no AVX2+FMA+F16C: nothing to compare the scalar kernel with");
    return;
  }
  check_scalar_bits(MatmulIsa::Avx2);
}

TEST_CASE("matmul_fast: the AVX-512 kernels give the scalar kernel's bits", "[cpu]") {
  if (!matmul_fast_has_avx512()) {
    WARN("skipped: no AVX-512 (F, BW, VL, DQ and VNNI) on this CPU");
    return;
  }
  const GgmlType with_avx512[] = {GgmlType::Q8_0, GgmlType::Q4_0,   GgmlType::Q4_1,
                                  GgmlType::Q5_0, GgmlType::Q5_1,   GgmlType::IQ4_NL,
                                  GgmlType::IQ4_XS, GgmlType::Q2_K, GgmlType::Q3_K,
                                  GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K,
                                  GgmlType::MXFP4};
  for (GgmlType type : with_avx512)
    CHECK(std::string(matmul_fast_kernel_name(type, MatmulIsa::Avx512)).find("avx512") !=
          std::string::npos);
  check_scalar_bits(MatmulIsa::Avx512);
  // Extremes of the integer step against activations of +-127, where a pairwise int16 sum
  // would saturate: q = -128 and +127 weights (Q8_0), 15-nibbles (Q4), and the K-quants at
  // their top (Q4_K / Q5_K scales and mins 63 with q = 15 / 31; Q6_K q = 63, scales -128 and
  // 127; Q2_K scales and mins 15 with q = 3; Q3_K q = -4 with scales -32 and q = 3 with 31),
  // in decode (1 token) and prefill tiles.
  const int64_t n = 512, d = 21;
  std::mt19937 rng(11);
  for (GgmlType type : with_avx512) {
    Weight w = make_weight(type, d, n, rng);
    const size_t bb = ggml_traits(type).type_size;
    for (size_t i = 0; i < w.bytes.size(); ++i) {
      const size_t k = i % bb;
      uint8_t& byte = w.bytes[i];
      switch (type) {
        case GgmlType::Q8_0:
          if (k >= 2) byte = i % 3 ? 0x80 : 0x7f;
          break;
        case GgmlType::Q4_1:
          if (k >= 4) byte = 0xff;
          break;
        case GgmlType::Q5_0:  // qh and nibbles: q = 31
        case GgmlType::Q5_1:
          if (k >= (type == GgmlType::Q5_0 ? 2u : 4u)) byte = 0xff;
          break;
        case GgmlType::IQ4_NL:  // nibble 0: level -127
          if (k >= 2) byte = i % 5 ? 0x00 : 0xff;
          break;
        case GgmlType::MXFP4:  // e 128 (scale 1); nibbles 7 and 15: levels +12 and -12
          byte = k == 0 ? 0x80 : (i % 5 ? 0x77 : 0xff);
          break;
        case GgmlType::IQ4_XS:  // bytes 2..7: scales (ls = 63 at 0xff), then nibbles
          if (k >= 2) byte = k < 8 ? 0xff : (i % 5 ? 0x00 : 0xff);
          break;
        case GgmlType::Q4_K:
        case GgmlType::Q5_K:  // bytes 0..3: d, dmin
          if (k >= 4) byte = 0xff;
          break;
        case GgmlType::Q2_K:  // scales, quants, then d, dmin at 80
          if (k < 80) byte = 0xff;
          break;
        case GgmlType::Q3_K:  // hmask, low bits, scales all clear (q = -4, sc - 32 = -32), or
                              // all set (q = 3, sc - 32 = 31), super-block by super-block
          if (k < 108) byte = (i / bb) % 2 ? 0xff : 0x00;
          break;
        case GgmlType::Q6_K:  // ql, qh, then 16 int8 scales, then d at 208
          if (k < 192) byte = 0xff;
          else if (k < 208) byte = k % 2 ? 0x7f : 0x80;
          break;
        default:
          if (k >= 2) byte = 0xff;
      }
    }
    std::vector<float> x(static_cast<size_t>(9 * n));
    for (size_t j = 0; j < x.size(); ++j) x[j] = (j / 7) % 2 ? 1.0f : -1.0f;
    for (int64_t n_tokens : {1, 5, 9}) {
      INFO(ggml_type_name(type) << " extremes, n_tokens " << n_tokens);
      const std::vector<float> scalar = run(MatmulIsa::Scalar, w, x, n_tokens, 1);
      CHECK(
          same_bits(scalar.data(), run(MatmulIsa::Avx512, w, x, n_tokens, 3).data(), d * n_tokens));
      for (MatmulIsa isa : {MatmulIsa::Avx512, MatmulIsa::Avx2})
        if (repack_supported(type, isa))
          CHECK(same_bits(scalar.data(),
                          run(isa, w, x, n_tokens, 3, MatmulPrecision::Fast, true).data(),
                          d * n_tokens));
    }
  }
}

TEST_CASE(
    "matmul_fast: repacked Q4_K, Q5_K, Q6_K, Q3_K, IQ4_XS, Q2_K, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, "
    "IQ4_NL and MXFP4 (AVX2, AVX-512) give the scalar kernel's bits",
    "[cpu]") {
  if (!matmul_fast_has_avx2()) {
    WARN("skipped: no AVX2+FMA+F16C on this CPU");
    return;
  }
  check_repacked_bits(MatmulIsa::Avx2);
  if (matmul_fast_has_avx512())
    check_repacked_bits(MatmulIsa::Avx512);
  else
    WARN("AVX-512 part skipped: no AVX-512 (F, BW, VL, DQ and VNNI) on this CPU");
  for (const auto& [type, isa, name] :
       {std::tuple{GgmlType::Q4_K, MatmulIsa::Avx512, "q4_k avx512-vnni repacked-x8"},
        std::tuple{GgmlType::Q5_K, MatmulIsa::Avx512, "q5_k avx512-vnni repacked-x8"},
        std::tuple{GgmlType::Q4_K, MatmulIsa::Avx2, "q4_k avx2 repacked-x8"},
        std::tuple{GgmlType::Q5_K, MatmulIsa::Avx2, "q5_k avx2 repacked-x8"},
        std::tuple{GgmlType::Q6_K, MatmulIsa::Avx2, "q6_k avx2 repacked-x8"},
        std::tuple{GgmlType::Q3_K, MatmulIsa::Avx512, "q3_k avx512-vnni repacked-x8"},
        std::tuple{GgmlType::Q3_K, MatmulIsa::Avx2, "q3_k avx2 repacked-x8"},
        std::tuple{GgmlType::Q4_0, MatmulIsa::Avx2, "q4_0 avx2 repacked-x16"},
        std::tuple{GgmlType::Q8_0, MatmulIsa::Avx2, "q8_0 avx2 repacked-x16"},
        std::tuple{GgmlType::Q4_1, MatmulIsa::Avx512, "q4_1 avx512-vnni repacked-x16"},
        std::tuple{GgmlType::Q5_0, MatmulIsa::Avx512, "q5_0 avx512-vnni repacked-x16"},
        std::tuple{GgmlType::Q5_1, MatmulIsa::Avx512, "q5_1 avx512-vnni repacked-x16"},
        std::tuple{GgmlType::Q4_1, MatmulIsa::Avx2, "q4_1 avx2 repacked-x16"},
        std::tuple{GgmlType::Q5_0, MatmulIsa::Avx2, "q5_0 avx2 repacked-x16"},
        std::tuple{GgmlType::Q5_1, MatmulIsa::Avx2, "q5_1 avx2 repacked-x16"}})
    CHECK(std::string(matmul_fast_kernel_name(type, isa, MatmulPrecision::Fast, true)) == name);
  // types and isas without a repacked layout: the kernel without, and matmul refuses a copy
  CHECK(std::string(matmul_fast_kernel_name(GgmlType::Q4_0, MatmulIsa::Scalar,
                                            MatmulPrecision::Fast, true)) == "q4_0 scalar");
  CHECK(std::string(matmul_fast_kernel_name(GgmlType::Q8_0, MatmulIsa::Avx512,
                                            MatmulPrecision::Fast, true)) ==
        "q8_0 avx512-vnni repacked-x16");
  CHECK(std::string(matmul_fast_kernel_name(GgmlType::Q4_1, MatmulIsa::Avx512,
                                            MatmulPrecision::Fast, false)) == "q4_1 avx512-vnni");
  CHECK(std::string(
            matmul_fast_kernel_name(GgmlType::BF16, MatmulIsa::Avx512, MatmulPrecision::Fast, true))
            .find("repacked") == std::string::npos);
  CHECK(std::string(matmul_fast_kernel_name(GgmlType::MXFP4, MatmulIsa::Avx512,
                                            MatmulPrecision::Fast, true)) ==
        "mxfp4 avx512-vnni repacked-x16");
  CHECK(std::string(matmul_fast_kernel_name(GgmlType::MXFP4, MatmulIsa::Avx2, MatmulPrecision::Fast,
                                            true)) == "mxfp4 avx2 repacked-x16");
  CHECK(std::string(matmul_fast_kernel_name(GgmlType::IQ4_NL, MatmulIsa::Avx512,
                                            MatmulPrecision::Fast, true)) ==
        "iq4_nl avx512-vnni repacked-x16");
  CHECK(std::string(matmul_fast_kernel_name(GgmlType::IQ4_NL, MatmulIsa::Avx2,
                                            MatmulPrecision::Fast, true)) ==
        "iq4_nl avx2 repacked-x16");
  CHECK_FALSE(repack_supported(GgmlType::Q4_K, MatmulIsa::Scalar));
  CHECK(repack_supported(GgmlType::Q3_K, MatmulIsa::Avx2));
  CHECK(repack_supported(GgmlType::Q2_K, MatmulIsa::Avx512));
  CHECK(repack_supported(GgmlType::MXFP4, MatmulIsa::Avx2));
  CHECK_FALSE(repack_supported(GgmlType::MXFP4, MatmulIsa::Scalar));
  CHECK_FALSE(repack_supported(GgmlType::BF16, MatmulIsa::Avx512));
  CHECK(repack_supported(GgmlType::Q4_0, MatmulIsa::Avx2));
  CHECK(repack_supported(GgmlType::Q8_0, MatmulIsa::Avx2));
  CHECK_FALSE(repack_supported(GgmlType::Q8_0, MatmulIsa::Scalar));
  CHECK(repack_supported(GgmlType::IQ4_NL, MatmulIsa::Avx512));
  CHECK_FALSE(repack_supported(GgmlType::IQ4_NL, MatmulIsa::Scalar));
  CHECK(repack_supported(GgmlType::Q4_1, MatmulIsa::Avx512));
  CHECK(repack_supported(GgmlType::Q5_0, MatmulIsa::Avx2));
  CHECK(repack_supported(GgmlType::Q5_1, MatmulIsa::Avx512));
  CHECK_FALSE(repack_supported(GgmlType::Q5_0, MatmulIsa::Scalar));
  std::mt19937 rng(3);
  const Weight w = make_weight(GgmlType::Q5_K, 9, 256, rng);
  ThreadPool pool(1);
  MatmulScratch scratch;
  const RepackedWeight copy = repack_weight(w.view(), pool);
  CHECK(copy.bytes() == 2 * kQ5kRecordBytes);  // 9 rows: two 8-row groups of one super-block
  std::vector<float> x(256, 1.0f), out(9);
  CHECK_THROWS_WITH(matmul_fast_isa(MatmulIsa::Scalar, w.view(), x.data(), 1, out.data(), pool,
                                    scratch, MatmulPrecision::Fast, copy.data()),
                    Catch::Contains("no repacked layout"));
  const char* const expected =
      "expected Q4_K, Q5_K, Q6_K, Q3_K, IQ4_XS, Q2_K, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL or "
      "MXFP4, got";
  CHECK_THROWS_WITH(repack_weight(make_weight(GgmlType::BF16, 8, 256, rng).view(), pool),
                    Catch::Contains(expected));
  CHECK_THROWS_WITH(repack_weight(make_weight(GgmlType::F16, 8, 32, rng).view(), pool),
                    Catch::Contains(expected));
}

// The fast backend repacks a bound matrix at its first matmul (where repack_active()), keeps
// the bound view on the original (get_rows reads it), and repacks again when another weight is
// bound at the same address.
TEST_CASE("CpuFastBackend: repacked weights keep matmul's and get_rows' results", "[cpu]") {
  std::mt19937 rng(9);
  for (GgmlType type :
       {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q3_K, GgmlType::Q4_0,
        GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0}) {
    Weight w = make_weight(type, 21, 512, rng);
    const std::vector<float> x = make_x(3, 512, rng);
    cpu::CpuFastBackend be(2);
    Buffer xb = test::make(be, x), out = be.alloc(3 * 21), rows = be.alloc(2 * 512);
    for (int pass = 0; pass < 2; ++pass) {
      INFO(ggml_type_name(type) << " pass " << pass);
      if (pass == 1) {  // another weight at the same address: rebinding repacks it again
        const std::vector<uint8_t> other = random_blocks(type, 21 * 512, rng);
        std::copy(other.begin(), other.end(), w.bytes.begin());
      }
      const WeightView v = be.bind_weight(w.view());
      CHECK(v.data == w.bytes.data());
      for (int64_t n_tokens : {1, 3}) {
        be.matmul(v, xb, n_tokens, out);
        const std::vector<float> want = run(MatmulIsa::Scalar, w, x, n_tokens, 1);
        CHECK(same_bits(test::read(be, out).data(), want.data(), 21 * n_tokens));
      }
      // 21 rows: three 8-row groups (K-quants) or two 16-row groups (32-element blocks)
      const int g_rows = repack_group_rows(type);
      const auto groups = static_cast<size_t>((21 + g_rows - 1) / g_rows);
      CHECK(be.repacked_bytes() ==
            (repack_active(type) ? groups * repacked_group_bytes(type, 512) : 0));
      be.get_rows(v, test::make_ids(be, {20, 2}), 2, rows);
      const std::vector<float> got = test::read(be, rows);
      CHECK(std::memcmp(got.data(), w.row(20).data(), 512 * sizeof(float)) == 0);
    }
  }
}

namespace {
// w's bytes in a file of their own, mapped read-only (as a GGUF file's tensors are)
MappedFile map_weight_file(const Weight& w, const std::string& name) {
  const std::string path = temp_dir() + "/" + name;
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(w.bytes.data()),
          static_cast<std::streamsize>(w.bytes.size()));
  f.close();
  return MappedFile(path);
}
}  // namespace

// copy_weight: the rows byte for byte, 2 MiB aligned where the copy spans a huge page; released
// anonymous pages keep their contents.
TEST_CASE("copy_weight: the rows as they are, huge-page aligned", "[cpu]") {
  std::mt19937 rng(11);
  ThreadPool pool(2);
  for (int64_t rows : {3, 1030}) {  // 6 KiB; 2 MiB + 12 KiB
    INFO(rows << " rows");
    const Weight w = make_weight(GgmlType::F16, rows, 1024, rng);
    const std::vector<uint8_t> before = w.bytes;
    const RepackedWeight copy = copy_weight(w.view(), pool, /*release=*/true);
    REQUIRE(copy.bytes() == w.bytes.size());
    CHECK(std::memcmp(copy.data(), w.bytes.data(), copy.bytes()) == 0);
    CHECK(w.bytes == before);
    const auto at = reinterpret_cast<uintptr_t>(copy.data());
    CHECK(at % 64 == 0);
    if (copy.bytes() >= kHugePageBytes) CHECK(at % kHugePageBytes == 0);
  }
  CHECK(copy_active(kHugePageBytes) == (repack_enabled() && huge_pages_available()));
  CHECK_FALSE(copy_active(kHugePageBytes - 1));

  // From a file's read-only mapping (a GGUF's): its released pages read back from the file.
  const Weight w = make_weight(GgmlType::F16, 1030, 1024, rng);
  const MappedFile file = map_weight_file(w, "copy_weight.bin");
  REQUIRE(file.size() == w.bytes.size());
  CHECK(in_read_only_file_mapping(file.data(), file.size()));
  CHECK_FALSE(in_read_only_file_mapping(file.data(), file.size() + 4096 * 4096));
  CHECK_FALSE(in_read_only_file_mapping(w.bytes.data(), w.bytes.size()));  // the heap
  WeightView on_file = w.view();
  on_file.data = file.data();
  const RepackedWeight copy = copy_weight(on_file, pool, /*release=*/true);
  CHECK(std::memcmp(copy.data(), w.bytes.data(), w.bytes.size()) == 0);
  CHECK(std::memcmp(file.data(), w.bytes.data(), w.bytes.size()) == 0);
}

// A weight the kernels read in the GGUF layout, of a huge page or more, in a file's mapping, is
// multiplied from a plain copy (where copy_active()): the same bits as from the original, the
// bound view and get_rows still on the original. The same weight on the heap is not copied.
TEST_CASE("CpuFastBackend: plain copies keep matmul's and get_rows' results", "[cpu]") {
  std::mt19937 rng(13);
  ThreadPool pool(2);
  MatmulScratch scratch;
  // F16 and BF16 (1030 x 1024: 2 MiB + 12 KiB); Q4_K under MatmulPrecision::Float (its
  // repacked layout is for Fast only)
  struct Case {
    GgmlType type;
    int64_t rows;
    MatmulPrecision precision;
  };
  for (const Case& c : {Case{GgmlType::F16, 1030, MatmulPrecision::Fast},
                        Case{GgmlType::BF16, 1030, MatmulPrecision::Fast},
                        Case{GgmlType::Q4_K, 3700, MatmulPrecision::Float}}) {
    INFO(ggml_type_name(c.type));
    const Weight w = make_weight(c.type, c.rows, 1024, rng);
    const std::vector<float> x = make_x(3, 1024, rng);
    cpu::CpuFastBackend be(2, c.precision);
    const MappedFile file = map_weight_file(w, "plain_copy.bin");
    WeightView on_file = w.view();
    on_file.data = file.data();
    const WeightView v = be.bind_weight(on_file);
    CHECK(v.data == file.data());
    Buffer xb = test::make(be, x), out = be.alloc(3 * c.rows), rows = be.alloc(2 * 1024);
    for (int64_t n_tokens : {1, 3}) {
      be.matmul(v, xb, n_tokens, out);
      std::vector<float> want(static_cast<size_t>(n_tokens * c.rows));
      matmul_fast(w.view(), x.data(), n_tokens, want.data(), pool, scratch, c.precision);
      CHECK(same_bits(test::read(be, out).data(), want.data(), n_tokens * c.rows));
    }
    CHECK(be.copied_bytes() == (copy_active(w.bytes.size()) ? w.bytes.size() : 0));
    CHECK(be.repacked_bytes() == 0);
    cpu::CpuFastBackend heap_be(2, c.precision);
    Buffer heap_x = test::make(heap_be, x), heap_out = heap_be.alloc(3 * c.rows);
    heap_be.matmul(heap_be.bind_weight(w.view()), heap_x, 3, heap_out);
    CHECK(heap_be.copied_bytes() == 0);
    be.get_rows(v, test::make_ids(be, {static_cast<int>(c.rows - 1), 2}), 2, rows);
    const std::vector<float> got = test::read(be, rows);
    CHECK(std::memcmp(got.data(), w.row(c.rows - 1).data(), 1024 * sizeof(float)) == 0);
  }
}

TEST_CASE("matmul_fast: kernel names, bad arguments", "[cpu]") {
  for (GgmlType type : kTypes) CHECK(std::string(matmul_fast_kernel_name(type)) != "unsupported");
  CHECK(std::string(matmul_fast_kernel_name(GgmlType::IQ2_XXS)) == "unsupported");
  CHECK(std::string(matmul_fast_kernel_name(GgmlType::Q3_K, MatmulIsa::Scalar)) == "q3_k scalar");
  CHECK(std::string(matmul_fast_kernel_name(GgmlType::Q3_K, MatmulIsa::Scalar,
                                            MatmulPrecision::Float))
            .rfind("dequant+f32", 0) == 0);
  if (matmul_fast_has_avx2()) {
    CHECK(std::string(matmul_fast_kernel_name(GgmlType::Q4_0, MatmulIsa::Avx2)) == "q4_0 avx2");
    CHECK(std::string(matmul_fast_kernel_name(GgmlType::Q2_K, MatmulIsa::Avx2)) ==
          "q2_k avx2");
    CHECK(std::string(matmul_fast_kernel_name(GgmlType::Q3_K, MatmulIsa::Avx2)) ==
          "q3_k avx2");
    CHECK(std::string(matmul_fast_kernel_name(GgmlType::Q4_K, MatmulIsa::Avx2)) ==
          "q4_k avx2");
    CHECK(std::string(matmul_fast_kernel_name(GgmlType::Q5_K, MatmulIsa::Avx2)) ==
          "q5_k avx2");
    CHECK(std::string(matmul_fast_kernel_name(GgmlType::Q6_K, MatmulIsa::Avx2)) ==
          "q6_k avx2");
    CHECK(std::string(matmul_fast_kernel_name(GgmlType::Q5_0, MatmulIsa::Avx2)) ==
          "q5_0 avx2");
    CHECK(std::string(matmul_fast_kernel_name(GgmlType::Q5_1, MatmulIsa::Avx2)) ==
          "q5_1 avx2");
    CHECK(std::string(matmul_fast_kernel_name(GgmlType::IQ4_NL, MatmulIsa::Avx2)) ==
          "iq4_nl avx2");
    CHECK(std::string(matmul_fast_kernel_name(GgmlType::IQ4_XS, MatmulIsa::Avx2)) ==
          "iq4_xs avx2");
    CHECK(std::string(matmul_fast_kernel_name(GgmlType::MXFP4, MatmulIsa::Avx2)) ==
          "mxfp4 avx2");
  }
  if (matmul_fast_has_avx512()) {
    CHECK(std::string(matmul_fast_kernel_name(GgmlType::Q4_0, MatmulIsa::Avx512)) ==
          "q4_0 avx512-vnni");
    CHECK(std::string(matmul_fast_kernel_name(GgmlType::Q4_K, MatmulIsa::Avx512)) ==
          "q4_k avx512-vnni (decode avx2)");
    CHECK(std::string(matmul_fast_kernel_name(GgmlType::Q3_K, MatmulIsa::Avx512)) ==
          "q3_k avx512-vnni (decode avx2)");
    // the dequantizing kernel has no AVX-512 tile: its AVX2 one runs
    CHECK(std::string(matmul_fast_kernel_name(GgmlType::Q3_K, MatmulIsa::Avx512,
                                              MatmulPrecision::Float)) ==
          std::string(matmul_fast_kernel_name(GgmlType::Q3_K, MatmulIsa::Avx2,
                                              MatmulPrecision::Float)));
  }
  CHECK(std::string(matmul_fast_kernel_name(GgmlType::Q4_0, MatmulIsa::Scalar)) == "q4_0 scalar");
  CHECK(std::string(matmul_fast_kernel_name(GgmlType::Q4_0)) ==
        matmul_fast_kernel_name(GgmlType::Q4_0, matmul_fast_auto_isa()));
  ThreadPool pool(1);
  MatmulScratch scratch;
  std::vector<uint8_t> bytes(4096);
  std::vector<float> x(64), out(64);
  auto call = [&](GgmlType t, int64_t n_cols, int64_t n_tokens) {
    matmul_fast(WeightView{"blk.0.w", t, n_cols, 1, bytes.data()}, x.data(), n_tokens, out.data(),
                pool, scratch);
  };
  CHECK_THROWS_WITH(call(GgmlType::IQ2_XXS, 256, 1), Catch::Contains("got IQ2_XXS"));
  CHECK_THROWS_WITH(call(GgmlType::Q4_K, 32, 1), Catch::Contains("multiple of 256"));
  CHECK_THROWS_WITH(call(GgmlType::Q4_0, 48, 1), Catch::Contains("multiple of 32"));
  CHECK_THROWS_WITH(call(GgmlType::F32, 8, 0), Catch::Contains("n_tokens >= 1"));
  CHECK_NOTHROW(call(GgmlType::F32, 8, 1));
}
