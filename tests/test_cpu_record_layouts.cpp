// The repacked weight records byte by byte, as weight_repack.h describes them: the bits tests
// (test_cpu_matmul_isa.cpp) would also pass with another layout that the kernels happened to
// agree with. The K-quant records with 8 row lanes (Q3_K, Q6_K, Q2_K, IQ4_XS), the 16-row records
// of the 32-element block types.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/thread_pool.h"
#include "backend/cpu/weight_repack.h"
#include "quant/dequant.h"
#include "support/matmul_cases.h"
#include "support/random_data.h"

using namespace llmctl;
using namespace llmctl::cpu;
using namespace llmctl::test;

namespace {

// Row r's bytes src[0..n) against their 32-byte record vectors from rec: byte j sits in vector
// j / 4, lane r, byte j % 4 (the K-quant records' weight layout, weight_repack.h).
int lane_mismatches(const uint8_t* rec, const uint8_t* src, int n, int r) {
  int bad = 0;
  for (int j = 0; j < n; ++j) bad += rec[32 * (j / 4) + 4 * r + j % 4] != src[j];
  return bad;
}

// Repacks a random 9-row, two-super-block `type` weight and returns the mismatches
// row_mismatches(rec, src, r) counts for every row r of every record (src: that row's GGUF
// super-block; a 9-row weight pads its second group with row 8), plus the record's bytes from
// `used` to its end that are not zero.
template <class F>
int record_mismatches(GgmlType type, size_t rec_bytes, size_t used, unsigned seed,
                      F row_mismatches) {
  std::mt19937 rng(seed);
  ThreadPool pool(2);
  const int64_t d = 9, nb = 2;
  const size_t sb_bytes = ggml_traits(type).type_size;
  const Weight w{type, d, 256 * nb, random_blocks(type, static_cast<size_t>(d * 256 * nb), rng)};
  const RepackedWeight copy = repack_weight(w.view(), pool);
  REQUIRE(copy.bytes() == 2 * static_cast<size_t>(nb) * rec_bytes);
  int bad = 0;
  for (int64_t g = 0; g < 2; ++g)
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* rec = copy.data() + static_cast<size_t>(g * nb + b) * rec_bytes;
      for (int r = 0; r < 8; ++r) {
        const int64_t row = std::min<int64_t>(d - 1, 8 * g + r);
        bad +=
            row_mismatches(rec, w.bytes.data() + static_cast<size_t>(row * nb + b) * sb_bytes, r);
      }
      for (size_t z = used; z < rec_bytes; ++z) bad += rec[z] != 0;
    }
  return bad;
}

}  // namespace

// The Q3_K record byte by byte (weight_repack.h): qs and hmask lanes, the scales decoded minus
// 32, d.
TEST_CASE("repack_weight: the Q3_K record layout", "[cpu]") {
  CHECK(record_mismatches(GgmlType::Q3_K, kQ3kRecordBytes, 912, 17,
                          [](const uint8_t* rec, const uint8_t* src, int r) {
                            int bad = lane_mismatches(rec, src + 32, 64, r) +  // qs
                                      lane_mismatches(rec + 512, src, 32, r);  // hmask
                            for (int i = 0; i < 16; ++i)
                              bad += static_cast<int8_t>(rec[768 + 16 * (i / 2) + 2 * r + i % 2]) !=
                                     q3_k_scale(src, i) - 32;
                            return bad + (std::memcmp(rec + 896 + 2 * r, src + 108, 2) != 0);
                          }) == 0);
}

// The Q6_K record byte by byte (weight_repack.h): ql and qh lanes, the int8 scales by
// sub-block and row, d.
TEST_CASE("repack_weight: the Q6_K record layout", "[cpu]") {
  CHECK(record_mismatches(GgmlType::Q6_K, kQ6kRecordBytes, 1680, 31,
                          [](const uint8_t* rec, const uint8_t* src, int r) {
                            int bad = lane_mismatches(rec, src, 128, r) +             // ql
                                      lane_mismatches(rec + 1024, src + 128, 64, r);  // qh
                            for (int i = 0; i < 16; ++i)
                              bad += rec[1536 + 8 * i + r] != src[192 + i];
                            return bad + (std::memcmp(rec + 1664 + 2 * r, src + 208, 2) != 0);
                          }) == 0);
}

// The Q2_K record byte by byte (weight_repack.h): quant lanes by half, the scale bytes as they
// are in pairs by block and row, d, dmin.
TEST_CASE("repack_weight: the Q2_K record layout", "[cpu]") {
  CHECK(record_mismatches(GgmlType::Q2_K, kQ2kRecordBytes, 672, 29,
                          [](const uint8_t* rec, const uint8_t* src, int r) {
                            int bad = lane_mismatches(rec, src + 16, 64, r);
                            for (int i = 0; i < 16; ++i)
                              bad += rec[512 + 16 * (i / 2) + 2 * r + i % 2] != src[i];
                            return bad + (std::memcmp(rec + 640 + 2 * r, src + 80, 2) != 0) +
                                   (std::memcmp(rec + 656 + 2 * r, src + 82, 2) != 0);
                          }) == 0);
}

// The IQ4_XS record byte by byte (weight_repack.h): nibble lanes by sub-block, the 6-bit scales
// (low nibbles at 4 + j / 2, high bit pairs in the uint16 at 2 of the GGUF block) minus 32, d.
TEST_CASE("repack_weight: the IQ4_XS record layout", "[cpu]") {
  CHECK(record_mismatches(GgmlType::IQ4_XS, kIq4xsRecordBytes, 1104, 23,
                          [](const uint8_t* rec, const uint8_t* src, int r) {
                            int bad = lane_mismatches(rec, src + 8, 128, r);
                            const int high = src[2] | src[3] << 8;
                            for (int j = 0; j < 8; ++j) {
                              const int ls = ((src[4 + j / 2] >> (4 * (j % 2))) & 15) |
                                             ((high >> (2 * j)) & 3) << 4;
                              bad += static_cast<int8_t>(rec[1024 + 8 * j + r]) != ls - 32;
                            }
                            return bad + (std::memcmp(rec + 1088 + 2 * r, src, 2) != 0);
                          }) == 0);
}

// The 16-row records byte by byte. The GGUF blocks: fp16 d, fp16 m (Q4_1, Q5_1), u32 qh (Q5_0,
// Q5_1), then the quants (IQ4_NL: Q4_0's block, its record Q4_0's).
TEST_CASE("repack_weight: the 16-row record layouts", "[cpu]") {
  std::mt19937 rng(5);
  ThreadPool pool(2);
  struct Case {
    GgmlType type;
    size_t rec, blk;
    bool min, high;  // has m; has qh
  };
  for (const Case& c : {Case{GgmlType::Q4_0, kQ4_0RecordBytes, 18, false, false},
                        Case{GgmlType::Q4_1, kQ4_1RecordBytes, 20, true, false},
                        Case{GgmlType::Q5_0, kQ5_0RecordBytes, 22, false, true},
                        Case{GgmlType::Q5_1, kQ5_1RecordBytes, 24, true, true},
                        Case{GgmlType::Q8_0, kQ8_0RecordBytes, 34, false, false},
                        Case{GgmlType::IQ4_NL, kQ4_0RecordBytes, 18, false, false}}) {
    const GgmlType type = c.type;
    const bool q8 = type == GgmlType::Q8_0;
    const int64_t d = 19, nb = 3;  // two groups, the second padded with row 18
    const Weight w{type, d, 32 * nb, random_blocks(type, static_cast<size_t>(d * 32 * nb), rng)};
    const RepackedWeight copy = repack_weight(w.view(), pool);
    REQUIRE(c.rec == 16 * c.blk);
    REQUIRE(copy.bytes() == 2 * static_cast<size_t>(nb) * c.rec);
    CHECK(repacked_group_bytes(type, 32 * nb) == static_cast<size_t>(nb) * c.rec);
    CHECK(repack_group_rows(type) == 16);
    // record offsets: d at 0, then m, qh (64 bytes), quants, each only where the type has it
    const size_t m_at = 32, qh_at = m_at + (c.min ? 32 : 0), q_at = qh_at + (c.high ? 64 : 0);
    const size_t src_qh = c.min ? 4 : 2, src_q = src_qh + (c.high ? 4 : 0);
    int bad = 0;
    for (int64_t g = 0; g < 2; ++g)
      for (int64_t b = 0; b < nb; ++b)
        for (int64_t r = 0; r < 16; ++r) {
          const uint8_t* src =
              w.bytes.data() + static_cast<size_t>(std::min(d - 1, 16 * g + r) * nb + b) * c.blk;
          const uint8_t* out = copy.data() + static_cast<size_t>(g * nb + b) * c.rec;
          bad += std::memcmp(out + 2 * r, src, 2) != 0;  // fp16 d
          if (c.min) bad += std::memcmp(out + m_at + 2 * r, src + 2, 2) != 0;
          const auto lane = static_cast<size_t>(4 * r);
          for (size_t j = 0; j < 32 && c.high; ++j) {  // weight j = 4 s + i: bit s of byte 4 r + i
            const int qh_bit = (src[src_qh + j / 8] >> (j % 8)) & 1;
            bad += ((out[qh_at + lane + j % 4] >> (j / 4)) & 1) != qh_bit;
          }
          for (size_t j = 0; j < (q8 ? 32u : 16u); ++j) {  // quant byte j: vector j / 4, byte j % 4
            const uint8_t want = q8 ? static_cast<uint8_t>(src[src_q + j] + 128) : src[src_q + j];
            bad += out[q_at + 64 * (j / 4) + lane + j % 4] != want;
          }
        }
    INFO(ggml_type_name(type));
    CHECK(bad == 0);
  }
}
