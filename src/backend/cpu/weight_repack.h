#pragma once
// Weights repacked once for the CPU matmul kernels (matmul_fast.h), as ggml-cpu's repack does:
// the rows of a Q4_K, Q5_K or Q6_K matrix interleaved 8 at a time and pre-transposed into the SIMD
// lanes the tile kernels multiply, so that decode reads each record with plain loads instead
// of gathering and transposing 8 rows' super-blocks on every call (it did: 57 % of a 1B
// Q4_K_M decode step in the Q4_K tile, most of it that unpacking). Same bytes per row within
// 3 % (Q4_K: 148 for 144, Q5_K: 180 for 176, Q6_K: 212 for 210), rows padded to a multiple of 8
// by repeating the last one (the padded lanes are computed and never stored). Q3_K likewise
// (116 bytes for 110: its 6-bit scales decoded to bytes; 1B-shape Q3_K_M file, 2-core Zen 4:
// decode 1.43x at one thread, 1.18x at two, BENCHMARKS.md 2026-12-06 night), and IQ4_XS (140
// bytes for 136, the scales decoded likewise; its levels looked up per 32-byte vector: 1B-shape
// IQ4_XS file decode 1.65x at one thread, 1.74x at two, 2026-12-06 afternoon), and Q2_K (the
// GGUF's bytes, transposed: 1B-shape Q2_K file decode 1.32x at one thread, 1.18x at two). The
// 32-element block types Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and IQ4_NL likewise 16 rows at a time (the
// same bytes per row), so that a decode tile reads one sequential stream instead of 16 row streams
// with a transpose and a scale gather per block (1B-shape file, loaded Xeon: Q8_0 decode 1.41x,
// Q4_0 1.19x; BENCHMARKS.md, 2026-12-03 afternoon; its AVX2 tiles: Q8_0 1.20x to 1.29x, Q4_0 1.16x
// to 1.24x, 2026-12-03 evening; 2-core Zen 4, 2 threads, 2026-12-04: SmolLM2-135M Q4_1 decode
// 1.22x, Gemma 3 270M Q4_K_M, mostly Q5_0, 1.16x; matmul decode Q4_1 1.2x to 1.8x, Q5_0 and
// Q5_1 1.4x to 2x, whose in-place AVX-512 kernels decode with 8-row AVX2 tiles; IQ4_NL, the
// same record as Q4_0: 1B-shape file decode 2.0x at one thread, 1.29x at two, 2026-12-06 late;
// MXFP4, the same with one E8M0 byte a row: 1B-shape file, its layers' matrices MXFP4, decode
// 2.69x at one thread, 1.74x at two, 2026-12-06 night).
//
// Layout: an 8-row group (rows 8g .. 8g + 7) is its super-blocks' records in order; group g
// starts at g * n_sb * kRecordBytes (n_sb = n_cols / 256). Row r of a record is lane r: every
// 32-byte vector holds 4 bytes per row, row 0 first.
//
//   Q4_K record (8 rows, one super-block), kQ4kRecordBytes = 1184:
//     0     qs[4][8]  32-byte vectors; vector (c, s) at 32 (8 c + s): row r's qs bytes
//                     32 c + 4 s .. 32 c + 4 s + 3 (low nibbles: weights 4 s .. 4 s + 3 of
//                     sub-block 2 c; high nibbles: of sub-block 2 c + 1)
//     1024  d[8]      fp16 per row
//     1040  dmin[8]   fp16 per row
//     1056  sc[8][8]  6-bit scale of sub-block j, row r at 1056 + 8 j + r (one byte)
//     1120  m[8][8]   6-bit min likewise at 1120 + 8 j + r
//   Q5_K record (8 rows, one super-block), kQ5kRecordBytes = 1440: Q4_K's with the fifth bits
//     0     qs[4][8]  as Q4_K's (the low 4 bits of each weight)
//     1024  qh[8]     vector s at 1024 + 32 s: row r's qh bytes 4 s .. 4 s + 3 (bit j of byte l:
//                     bit 4 of weight l of sub-block j)
//     1280  d[8], 1296 dmin[8], 1312 sc[8][8], 1376 m[8][8]   as Q4_K's at 1024 .. 1183
//   Q6_K record (8 rows, one super-block), kQ6kRecordBytes = 1696:
//     0     ql[4][8]  vector (q, s) at 32 (8 q + s): row r's ql bytes 32 q + 4 s .. + 3
//     1024  qh[2][8]  vector (h, s) at 1024 + 32 (8 h + s): row r's qh bytes 32 h + 4 s .. + 3
//     1536  sc[16][8] int8 scale i of row r at 1536 + 8 i + r
//     1664  d[8]      fp16 per row
//     1680  16 zero bytes (records stay 32-byte aligned)
//   Q3_K record (8 rows, one super-block), kQ3kRecordBytes = 928:
//     0     qs[2][8]  vector (h, s) at 32 (8 h + s): row r's qs bytes 32 h + 4 s .. + 3
//     512   hm[8]     vector s at 512 + 32 s: row r's hmask bytes 4 s .. 4 s + 3
//     768   sc[8][8][2] int8 scale i minus 32 (-32..31) in pairs by block and row: scale
//                     2 j + e of row r at 768 + 16 j + 2 r + e (one widening load gives each
//                     row lane block j's pair; matmul_repacked_k16.h)
//     896   d[8]      fp16 per row
//     912   16 zero bytes (records stay 32-byte aligned)
//   IQ4_XS record (8 rows, one super-block), kIq4xsRecordBytes = 1120:
//     0     qs[8][4]  vector (j, k) at 32 (4 j + k): row r's nibble bytes 4 k .. 4 k + 3 of
//                     sub-block j (low nibbles: levels 4 k .. 4 k + 3; high: 16 + 4 k ..)
//     1024  sc[8][8]  int8 scale ls_j - 32 (-32..31), row r at 1024 + 8 j + r
//     1088  d[8]      fp16 per row
//     1104  16 zero bytes (records stay 32-byte aligned)
//   Q2_K record (8 rows, one super-block), kQ2kRecordBytes = 672 (the GGUF's 84 bytes a row):
//     0     qs[2][8]  vector (h, s) at 32 (8 h + s): row r's quant bytes 32 h + 4 s .. + 3 (bits
//                     2 k, 2 k + 1 of each: weights 4 s .. 4 s + 3 of sub-blocks 8 h + 2 k, + 1)
//     512   sc[8][8][2] the scale bytes as the GGUF has them (low nibble the scale, high
//                     nibble the min), by block and row: byte 2 j + e of row r (sub-block
//                     2 j + e) at 512 + 16 j + 2 r + e, so that one widening load gives each
//                     row lane its block's pair (sub-blocks 2 j, 2 j + 1) as two int16
//     640   d[8], 656 dmin[8]   fp16 per row
//
// The 32-element block types Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL and MXFP4 (one block per
// record, 16-row groups, as the AVX-512 tiles' 16 int32 lanes): a 16-row group (rows 16g .. 16g
// + 15) is its blocks' records in order, one sequential stream; group g starts at g * (n_cols /
// 32) * kRecordBytes. Every 64-byte vector holds 4 bytes per row, row 0 first, so one vpdpbusd
// takes 4 weights of all 16 rows. A record is these fields in this order, each only where the
// type has it (q16_record() below: the offsets), the same bytes as the 16 rows' blocks:
//     d[16]     fp16 per row (32 bytes); MXFP4: its E8M0 byte per row (16 bytes)
//     m[16]     Q4_1, Q5_1: fp16 min per row (32 bytes)
//     qh        Q5_0, Q5_1: one 64-byte vector, the fifth bits sorted by step: bit s of byte
//               4 r + i is bit 4 s + i of row r's qh (the fifth bit of weight 4 s + i), so that
//               step s's 64 fifth bits are bit s of every byte (one shift by 4 - s and a mask
//               put them at bit 4 of the weight bytes)
//     qs[4]     nibble types: 64-byte vectors; vector k: row r's qs bytes 4 k .. 4 k + 3 (low
//               nibbles: weights 4 k .. 4 k + 3 (step k), high nibbles: 16 + 4 k .. (step
//               4 + k))
//     q[8]      Q8_0: vector s: row r's q[4 s .. 4 s + 3] + 128 as unsigned bytes (the unsigned
//               operand of vpdpbusd; the kernel subtracts 128 x the activation block's sum, so
//               the integer dot product is exactly ggml's)
//   record bytes (16 x the block):  Q4_0 288 (d 0, qs 32)        Q4_1 320 (d 0, m 32, qs 64)
//     Q5_0 352 (d 0, qh 32, qs 96)  Q5_1 384 (d 0, m 32, qh 64, qs 128)  Q8_0 544 (d 0, q 32)
//     IQ4_NL 288, Q4_0's (its block is Q4_0's bytes; the kernels look the nibbles up)
//     MXFP4 272 (e 0, qs 16: IQ4_NL's with one scale byte a row; the 64-byte vectors sit 16
//     bytes off a record's start, unaligned loads as the odd records of Q4_0 already are)
// Nothing is decoded to float: the kernels compute d * sc as the in-place kernels do, so the
// results keep the scalar kernels' bits (matmul_kquant_tile.h's contract).
//
// The AVX-512 kernels (matmul_kernel_q4_k_repacked() ..., matmul_repacked_tile.h) and the AVX2
// kernels (matmul_kernel_q4_k_repacked_avx2() ..., matmul_repacked_tile_avx2.h) read the K-quant
// layouts; the 32-element block types' likewise (matmul_kernel_q4_0_repacked() ...:
// matmul_repacked_quant_tile.h; matmul_kernel_q4_0_repacked_avx2() ...:
// matmul_repacked_quant_tile_avx2.h, which takes each 64-byte vector as two 32-byte halves of 8
// rows, the registers the in-place AVX2 tile builds by transposing 8 rows). The scalar kernels
// read the GGUF layout in place.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "backend/backend.h"
#include "backend/cpu/matmul_fast.h"
#include "backend/cpu/thread_pool.h"

namespace llmctl::cpu {

constexpr size_t kQ4kRecordBytes = 1184;
constexpr size_t kQ5kRecordBytes = 1440;
constexpr size_t kQ6kRecordBytes = 1696;
constexpr size_t kQ3kRecordBytes = 928;
constexpr size_t kIq4xsRecordBytes = 1120;
constexpr size_t kQ2kRecordBytes = 672;
constexpr int kRepackRows = 8;

// The 16-row record of a 32-element block type (the layout above): which fields it has, their
// byte offsets (a field the type does not have takes no bytes) and the record's size.
struct Q16Record {
  bool has_min, high_bit, nibbles;  // m (Q4_1, Q5_1); qh (Q5_0, Q5_1); qs, not q (Q8_0)
  bool e8m0;                        // d is one E8M0 byte a row (MXFP4), not an fp16
  size_t d, m, qh, q, bytes;
  size_t scale_bytes() const { return e8m0 ? 1 : 2; }  // of d, per row (and in the block)
};
constexpr Q16Record q16_record(bool has_min, bool high_bit, bool nibbles, bool e8m0 = false) {
  const size_t m = e8m0 ? 16 : 32, qh = m + (has_min ? 32 : 0), q = qh + (high_bit ? 64 : 0);
  return Q16Record{has_min, high_bit, nibbles, e8m0, 0, m, qh, q, q + (nibbles ? 4 : 8) * 64};
}
constexpr size_t kQ4_0RecordBytes = q16_record(false, false, true).bytes;
constexpr size_t kQ4_1RecordBytes = q16_record(true, false, true).bytes;
constexpr size_t kQ5_0RecordBytes = q16_record(false, true, true).bytes;
constexpr size_t kQ5_1RecordBytes = q16_record(true, true, true).bytes;
constexpr size_t kQ8_0RecordBytes = q16_record(false, false, false).bytes;
constexpr size_t kMxfp4RecordBytes = q16_record(false, false, true, true).bytes;
static_assert(kQ4_0RecordBytes == 16 * 18 && kQ4_1RecordBytes == 16 * 20 &&
                  kQ5_0RecordBytes == 16 * 22 && kQ5_1RecordBytes == 16 * 24 &&
                  kQ8_0RecordBytes == 16 * 34 && kMxfp4RecordBytes == 16 * 17,
              "a record holds the 16 rows' blocks in the same bytes");

// Whether the kernels of `isa` (resolved, never Auto) read repacked `type` weights: Q3_K, Q4_K,
// Q5_K, Q6_K, IQ4_XS, Q2_K, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL and MXFP4 on Avx2 and Avx512.
bool repack_supported(GgmlType type, MatmulIsa isa);
// LLMCTL_MATMUL_REPACK: "on" (the default, also unset or empty) or "off" (read once; anything
// else is an Error): whether the fast CPU backend repacks the weights it can and copies the
// others into huge pages (copy_active); off: matmul reads every weight in the file's pages.
bool repack_enabled();
// Whether the fast CPU backend multiplies `type` weights repacked in this process:
// repack_enabled() and repack_supported(type, matmul_fast_auto_isa()).
bool repack_active(GgmlType type);
// Rows of one group of a repacked `type` weight: 8 (K-quants) or 16 (the 32-element blocks).
int repack_group_rows(GgmlType type);
// Elements per record (the row length must be a positive multiple): 256 or 32.
int64_t repack_record_cols(GgmlType type);
// Bytes of one group of a repacked `type` weight with rows of n_cols elements.
size_t repacked_group_bytes(GgmlType type, int64_t n_cols);

// Bytes of one huge page (x86-64's transparent huge pages).
constexpr size_t kHugePageBytes = size_t{2} << 20;

// A copy of a weight, repacked (repack_weight) or as it is (copy_weight), in anonymous memory:
// 2 MiB aligned where it spans a huge page, and advised into huge pages (MADV_HUGEPAGE).
class RepackedWeight {
 public:
  RepackedWeight() = default;
  const uint8_t* data() const { return data_.get(); }
  size_t bytes() const { return bytes_; }
  bool empty() const { return bytes_ == 0; }

 private:
  friend RepackedWeight repack_weight(const WeightView& w, ThreadPool& pool, bool release);
  friend RepackedWeight copy_weight(const WeightView& w, ThreadPool& pool, bool release);
  // `bytes` of zeroed memory; Error (naming the weight) when there are none to give
  static RepackedWeight allocate(const std::string& name, size_t bytes);
  struct Unmap {
    size_t bytes;
    void operator()(uint8_t* p) const;
  };
  std::unique_ptr<uint8_t, Unmap> data_{nullptr, Unmap{0}};
  size_t bytes_ = 0;
};

// One 16-row group of a matrix of 32-element blocks (rows: the group's 16 rows, n_blocks blocks
// each; blocks of `block_bytes` with the fields `rec` says) into dst (weight_repack_quant.cpp).
void repack_group_q16(const Q16Record& rec, size_t block_bytes, const uint8_t* const rows[16],
                      int64_t n_blocks, uint8_t* dst);

// w (of a type repack_supported() names) in the layout above, written by the pool's threads.
// Throws Error for another type or a row length that is not a multiple of
// repack_record_cols().
// release: the whole pages of w.data leave the resident set as they are read, slice by slice,
// so the original and the copy are never resident together. A read-only file mapping (a GGUF
// file's, in_read_only_file_mapping) drops them with MADV_DONTNEED: the page cache keeps the
// file for the next run, and a page touched again (get_rows of a tied embedding) maps back
// from it. Other memory gets MADV_PAGEOUT, which keeps its contents (best effort: a kernel
// without it keeps the pages).
RepackedWeight repack_weight(const WeightView& w, ThreadPool& pool, bool release = false);

// Plain copies. A weight the kernels read in the GGUF layout (F16, BF16, F32) sits in the
// file's mapping, in 4 KiB pages: decode streams it with a TLB miss every 4 KiB and hardware
// prefetchers that stop at each page's end. The fast CPU backend
// copies such a weight, as it is, into huge pages at its first matmul (F16 1B-shape decode,
// Zen 4, 2026-12-06: 1.05x at one thread, at two within the noise; BENCHMARKS.md).
// Whether the kernel gives huge pages to anonymous memory that asks
// (/sys/kernel/mm/transparent_hugepage/enabled is [always] or [madvise]; read once).
bool huge_pages_available();
// Whether the fast CPU backend copies a weight of `bytes` it reads in place: repack_enabled()
// (LLMCTL_MATMUL_REPACK=off keeps every weight in the file's pages), huge_pages_available(),
// and at least one huge page of it.
bool copy_active(size_t bytes);
// w's rows, byte for byte, written by the pool's threads; release as repack_weight's.
RepackedWeight copy_weight(const WeightView& w, ThreadPool& pool, bool release = false);

}  // namespace llmctl::cpu
