// Weights repacked for the CPU matmul kernels (weight_repack.h): the layouts written from the
// GGUF rows with plain byte copies (once per weight, at its first matmul), and the release of
// the original pages.
#include "backend/cpu/weight_repack.h"

#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

#include "core/error.h"
#include "core/mapped_file.h"
#include "quant/dequant.h"

namespace llmctl::cpu {

namespace {

constexpr int64_t kSuperBlock = 256;

// [begin, begin + bytes), whole pages, out of the resident set. A read-only file mapping (a
// GGUF file's) drops them from this process with MADV_DONTNEED: the file's page cache keeps
// them, so the next run maps them without reading the disk (MADV_PAGEOUT evicted them from
// it: a 2 GB F16 file then took 3 to 4 s to load instead of 0.5 s on our VM). Other memory gets
// MADV_PAGEOUT, which keeps its contents (anonymous memory may be swapped out; DONTNEED would
// zero it). Touched again, either reads back the same bytes. Best effort: a kernel without
// MADV_PAGEOUT leaves the pages of other memory.
void release_pages(uintptr_t begin, size_t bytes, bool file_backed) {
  if (file_backed) {
    madvise(reinterpret_cast<void*>(begin), bytes, MADV_DONTNEED);
    return;
  }
#if defined(MADV_PAGEOUT)
  madvise(reinterpret_cast<void*>(begin), bytes, MADV_PAGEOUT);
#else
  (void)begin;
  (void)bytes;
#endif
}

// The pages of an original handed back as a copy passes them (release_pages): whole pages
// only, each once.
class PageRelease {
 public:
  PageRelease(const void* begin, size_t bytes)
      : page_(static_cast<uintptr_t>(sysconf(_SC_PAGESIZE))),
        released_((reinterpret_cast<uintptr_t>(begin) + page_ - 1) / page_ * page_),
        file_backed_(in_read_only_file_mapping(begin, bytes)) {}
  // the whole pages below end, not yet released
  void up_to(const uint8_t* end) {
    const uintptr_t last = reinterpret_cast<uintptr_t>(end) / page_ * page_;
    if (last <= released_) return;
    release_pages(released_, last - released_, file_backed_);
    released_ = last;
  }

 private:
  uintptr_t page_, released_;
  bool file_backed_;
};

// Every repacked layout (weight_repack.h): the one table the functions below read.
struct Layout {
  GgmlType type;
  int group_rows;       // 8 (K-quants) or 16
  int64_t record_cols;  // elements per record
  size_t record_bytes;
  Q16Record q16;  // the 16-row record's fields (group_rows == 16 only)
};
constexpr Layout k_layout(GgmlType type, size_t record_bytes) {
  return Layout{type, kRepackRows, kSuperBlock, record_bytes, Q16Record{}};
}
constexpr Layout q16_layout(GgmlType type, bool has_min, bool high_bit, bool nibbles,
                            bool e8m0 = false) {
  const Q16Record r = q16_record(has_min, high_bit, nibbles, e8m0);
  return Layout{type, 16, 32, r.bytes, r};
}
constexpr Layout kLayouts[] = {
    k_layout(GgmlType::Q4_K, kQ4kRecordBytes),
    k_layout(GgmlType::Q5_K, kQ5kRecordBytes),
    k_layout(GgmlType::Q6_K, kQ6kRecordBytes),
    k_layout(GgmlType::Q3_K, kQ3kRecordBytes),
    k_layout(GgmlType::IQ4_XS, kIq4xsRecordBytes),
    k_layout(GgmlType::Q2_K, kQ2kRecordBytes),
    //                          min    fifth bit  nibbles
    q16_layout(GgmlType::Q4_0, false, false, true),
    q16_layout(GgmlType::Q4_1, true, false, true),
    q16_layout(GgmlType::Q5_0, false, true, true),
    q16_layout(GgmlType::Q5_1, true, true, true),
    q16_layout(GgmlType::Q8_0, false, false, false),
    q16_layout(GgmlType::IQ4_NL, false, false, true),  // Q4_0's record: the same block bytes
    q16_layout(GgmlType::MXFP4, false, false, true, /*e8m0=*/true),
};

// type's layout, or nullptr (none)
const Layout* layout_of(GgmlType type) {
  for (const Layout& l : kLayouts)
    if (l.type == type) return &l;
  return nullptr;
}

// "Q4_K, Q5_K, ... or Q8_0": the types with a layout, for errors.
std::string layout_type_names() {
  std::string s;
  const size_t n = std::size(kLayouts);
  for (size_t i = 0; i < n; ++i)
    s += (i == 0 ? "" : i + 1 == n ? " or " : ", ") + std::string(ggml_type_name(kLayouts[i].type));
  return s;
}

// 4 bytes of each of the 8 rows (at byte `off` of each super-block sb[r]) into one 32-byte
// vector: row r's at 4 r.
void put_lanes(uint8_t* vec, const uint8_t* const sb[8], int off) {
  for (int r = 0; r < 8; ++r) std::memcpy(vec + 4 * r, sb[r] + off, 4);
}

// Q4_K: 144-byte super-blocks (fp16 d, fp16 dmin, 12 bytes of packed 6-bit scales and mins, 128
// bytes of nibbles). Q5_K (176 bytes) has the same fields with 32 bytes of fifth bits (qh)
// before the nibbles: its record is Q4_K's with the qh vectors at 1024 (with_high).
void record_q45_k(const uint8_t* const sb[8], bool with_high, uint8_t* rec) {
  const int qs = with_high ? 48 : 16;
  for (int c = 0; c < 4; ++c)
    for (int s = 0; s < 8; ++s) put_lanes(rec + 32 * (8 * c + s), sb, qs + 32 * c + 4 * s);
  if (with_high)
    for (int s = 0; s < 8; ++s) put_lanes(rec + 1024 + 32 * s, sb, 16 + 4 * s);
  uint8_t* scales = rec + (with_high ? 1280 : 1024);
  for (int r = 0; r < 8; ++r) {
    std::memcpy(scales + 2 * r, sb[r], 2);
    std::memcpy(scales + 16 + 2 * r, sb[r] + 2, 2);
    for (int j = 0; j < 8; ++j) {
      int sc = 0, m = 0;
      k_scale_min(sb[r] + 4, j, &sc, &m);
      scales[32 + 8 * j + r] = static_cast<uint8_t>(sc);
      scales[96 + 8 * j + r] = static_cast<uint8_t>(m);
    }
  }
}

// Q6_K: 210-byte super-blocks (128 bytes ql, 64 bytes qh, 16 int8 scales, fp16 d).
void record_q6_k(const uint8_t* const sb[8], uint8_t* rec) {
  for (int q = 0; q < 4; ++q)
    for (int s = 0; s < 8; ++s) put_lanes(rec + 32 * (8 * q + s), sb, 32 * q + 4 * s);
  for (int h = 0; h < 2; ++h)
    for (int s = 0; s < 8; ++s) put_lanes(rec + 1024 + 32 * (8 * h + s), sb, 128 + 32 * h + 4 * s);
  for (int r = 0; r < 8; ++r) {
    for (int i = 0; i < 16; ++i) rec[1536 + 8 * i + r] = sb[r][192 + i];
    std::memcpy(rec + 1664 + 2 * r, sb[r] + 208, 2);
  }
  std::memset(rec + 1680, 0, 16);
}

// Q3_K: 110-byte super-blocks (32 bytes hmask, 64 bytes qs, 12 bytes of packed 6-bit scales,
// fp16 d); the scales decoded once here, as bytes minus 32.
void record_q3_k(const uint8_t* const sb[8], uint8_t* rec) {
  for (int h = 0; h < 2; ++h)
    for (int s = 0; s < 8; ++s) put_lanes(rec + 32 * (8 * h + s), sb, 32 + 32 * h + 4 * s);
  for (int s = 0; s < 8; ++s) put_lanes(rec + 512 + 32 * s, sb, 4 * s);
  for (int r = 0; r < 8; ++r) {
    for (int i = 0; i < 16; ++i)
      rec[768 + 16 * (i / 2) + 2 * r + i % 2] =
          static_cast<uint8_t>(static_cast<int8_t>(q3_k_scale(sb[r], i) - 32));
    std::memcpy(rec + 896 + 2 * r, sb[r] + 108, 2);
  }
  std::memset(rec + 912, 0, 16);
}

// IQ4_XS: 136-byte super-blocks (fp16 d, 16 bits of high scale bits, 4 bytes of low scale
// nibbles, 16 bytes of level nibbles per sub-block); the 6-bit scales decoded once here, as
// bytes minus 32.
void record_iq4_xs(const uint8_t* const sb[8], uint8_t* rec) {
  for (int j = 0; j < 8; ++j)
    for (int k = 0; k < 4; ++k) put_lanes(rec + 32 * (4 * j + k), sb, 8 + 16 * j + 4 * k);
  for (int r = 0; r < 8; ++r) {
    for (int j = 0; j < 8; ++j)
      rec[1024 + 8 * j + r] = static_cast<uint8_t>(static_cast<int8_t>(iq4_xs_scale(sb[r], j)));
    std::memcpy(rec + 1088 + 2 * r, sb[r], 2);
  }
  std::memset(rec + 1104, 0, 16);
}

// Q2_K: 84-byte super-blocks (16 scale bytes, 64 bytes of 2-bit quants, fp16 d, fp16 dmin).
void record_q2_k(const uint8_t* const sb[8], uint8_t* rec) {
  for (int h = 0; h < 2; ++h)
    for (int s = 0; s < 8; ++s) put_lanes(rec + 32 * (8 * h + s), sb, 16 + 32 * h + 4 * s);
  for (int r = 0; r < 8; ++r) {
    for (int i = 0; i < 16; ++i) rec[512 + 16 * (i / 2) + 2 * r + i % 2] = sb[r][i];
    std::memcpy(rec + 640 + 2 * r, sb[r] + 80, 2);
    std::memcpy(rec + 656 + 2 * r, sb[r] + 82, 2);
  }
}

}  // namespace

bool repack_supported(GgmlType type, MatmulIsa isa) {
  // every layout on AVX-512 and AVX2 (matmul_repacked_tile_avx2.h,
  // matmul_repacked_quant_tile_avx2.h); the scalar kernels read the GGUF layout
  return layout_of(type) != nullptr && (isa == MatmulIsa::Avx512 || isa == MatmulIsa::Avx2);
}

bool repack_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("LLMCTL_MATMUL_REPACK");
    const std::string s = v != nullptr ? v : "";
    if (s.empty() || s == "on") return true;
    if (s == "off") return false;
    throw Error(fmt::format("LLMCTL_MATMUL_REPACK: expected on or off, got '{}'", s));
  }();
  return on;
}

bool repack_active(GgmlType type) {
  return repack_enabled() && repack_supported(type, matmul_fast_auto_isa());
}

int repack_group_rows(GgmlType type) {
  const Layout* l = layout_of(type);
  return l != nullptr ? l->group_rows : kRepackRows;
}

int64_t repack_record_cols(GgmlType type) {
  const Layout* l = layout_of(type);
  return l != nullptr ? l->record_cols : kSuperBlock;
}

size_t repacked_group_bytes(GgmlType type, int64_t n_cols) {
  const Layout* l = layout_of(type);
  return l != nullptr ? static_cast<size_t>(n_cols / l->record_cols) * l->record_bytes : 0;
}

void RepackedWeight::Unmap::operator()(uint8_t* p) const {
  if (p != nullptr) munmap(p, bytes);
}

RepackedWeight RepackedWeight::allocate(const std::string& name, size_t bytes) {
  // 2 MiB more than asked, the start moved up to a 2 MiB boundary and the rest handed back:
  // the kernel aligns only mappings of whole huge pages itself, and a huge page needs an
  // aligned 2 MiB of the mapping
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t span = (bytes + page - 1) / page * page;
  const size_t extra = span >= kHugePageBytes ? kHugePageBytes : 0;
  void* p = mmap(nullptr, span + extra, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    throw Error(fmt::format("copy of '{}': cannot allocate {} bytes", name, bytes));
  auto* base = static_cast<uint8_t*>(p);
  uint8_t* start = base;
  if (extra > 0) {
    const auto at = reinterpret_cast<uintptr_t>(base);
    start = reinterpret_cast<uint8_t*>((at + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes);
    if (start > base) munmap(base, static_cast<size_t>(start - base));
    if (start + span < base + span + extra)
      munmap(start + span, static_cast<size_t>(base + span + extra - (start + span)));
  }
#if defined(MADV_HUGEPAGE)
  // huge pages where the kernel has them to give (transparent_hugepage=madvise): decode
  // streams the copy, and with 4 KiB pages it takes a TLB miss every 4 KiB and the hardware
  // prefetchers stop at each page's end (an F16 1B decode step: 1.05x with huge pages at one
  // thread; BENCHMARKS.md 2026-12-06 night)
  madvise(start, span, MADV_HUGEPAGE);
#endif
  RepackedWeight out;
  out.bytes_ = bytes;
  out.data_ = std::unique_ptr<uint8_t, Unmap>(start, Unmap{span});
  return out;
}

RepackedWeight repack_weight(const WeightView& w, ThreadPool& pool, bool release) {
  const Layout* layout = layout_of(w.type);
  if (layout == nullptr)
    throw Error(fmt::format("repack '{}': expected {}, got {}", w.name, layout_type_names(),
                            ggml_type_name(w.type)));
  const int64_t cols = layout->record_cols;
  if (w.n_cols < cols || w.n_cols % cols != 0 || w.n_rows < 1 || w.data == nullptr)
    throw Error(
        fmt::format("repack '{}': expected rows of a positive multiple of {}, got [{}, {}]",
                    w.name, cols, w.n_rows, w.n_cols));
  const int64_t g_rows = layout->group_rows;
  const int64_t n_groups = (w.n_rows + g_rows - 1) / g_rows;
  const int64_t n_sb = w.n_cols / cols;
  const size_t group = repacked_group_bytes(w.type, w.n_cols);
  const size_t rec = layout->record_bytes, row_bytes = weight_row_bytes(w.type, w.n_cols);
  const size_t sb_bytes = ggml_traits(w.type).type_size;
  RepackedWeight out = RepackedWeight::allocate(w.name, group * static_cast<size_t>(n_groups));
  const auto* src = static_cast<const uint8_t*>(w.data);
  uint8_t* dst = out.data_.get();
  // Slices of groups, so that released pages of the original leave as the copy grows (the
  // resident set never holds both in full: a tied 128256-row embedding is 215 MB of Q6_K).
  constexpr int64_t kSliceGroups = 256;
  PageRelease done(w.data, row_bytes * static_cast<size_t>(w.n_rows));
  for (int64_t s0 = 0; s0 < n_groups; s0 += kSliceGroups) {
    const int64_t s1 = std::min(n_groups, s0 + kSliceGroups);
    pool.parallel_for(s1 - s0, [&](int64_t g0, int64_t g1, int) {
      for (int64_t g = s0 + g0; g < s0 + g1; ++g) {
        const uint8_t* rows[16];
        for (int64_t r = 0; r < g_rows; ++r)  // past the last row: the last row again
          rows[r] = src + static_cast<size_t>(std::min(w.n_rows - 1, g_rows * g + r)) * row_bytes;
        if (g_rows == 16) {
          repack_group_q16(layout->q16, sb_bytes, rows, n_sb, dst + static_cast<size_t>(g) * group);
          continue;
        }
        for (int64_t s = 0; s < n_sb; ++s) {
          const uint8_t* sb[8];
          for (int r = 0; r < 8; ++r) sb[r] = rows[r] + static_cast<size_t>(s) * sb_bytes;
          uint8_t* record = dst + static_cast<size_t>(g) * group + static_cast<size_t>(s) * rec;
          switch (w.type) {
            case GgmlType::Q4_K:
            case GgmlType::Q5_K:
              record_q45_k(sb, w.type == GgmlType::Q5_K, record);
              break;
            case GgmlType::Q3_K:
              record_q3_k(sb, record);
              break;
            case GgmlType::IQ4_XS:
              record_iq4_xs(sb, record);
              break;
            case GgmlType::Q2_K:
              record_q2_k(sb, record);
              break;
            default:
              record_q6_k(sb, record);
          }
        }
      }
    });
    if (release)  // the rows read so far
      done.up_to(src + static_cast<size_t>(std::min(w.n_rows, g_rows * s1)) * row_bytes);
  }
  return out;
}

bool huge_pages_available() {
  static const bool on = [] {
    std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string line;
    std::getline(f, line);
    return line.find("[always]") != std::string::npos ||
           line.find("[madvise]") != std::string::npos;
  }();
  return on;
}

bool copy_active(size_t bytes) {
  return repack_enabled() && huge_pages_available() && bytes >= kHugePageBytes;
}

RepackedWeight copy_weight(const WeightView& w, ThreadPool& pool, bool release) {
  if (w.n_rows < 1 || w.n_cols < 1 || w.data == nullptr)
    throw Error(
        fmt::format("copy '{}': expected a matrix, got [{}, {}]", w.name, w.n_rows, w.n_cols));
  const size_t row_bytes = weight_row_bytes(w.type, w.n_cols);
  RepackedWeight out = RepackedWeight::allocate(w.name, row_bytes * static_cast<size_t>(w.n_rows));
  const auto* src = static_cast<const uint8_t*>(w.data);
  uint8_t* dst = out.data_.get();
  // slices of about 8 MiB, released as they are copied (as repack_weight's)
  const int64_t slice = std::max<int64_t>(1, static_cast<int64_t>((size_t{8} << 20) / row_bytes));
  PageRelease done(w.data, row_bytes * static_cast<size_t>(w.n_rows));
  for (int64_t r0 = 0; r0 < w.n_rows; r0 += slice) {
    const int64_t r1 = std::min(w.n_rows, r0 + slice);
    pool.parallel_for(r1 - r0, [&](int64_t a, int64_t b, int) {
      const size_t at = static_cast<size_t>(r0 + a) * row_bytes;
      std::memcpy(dst + at, src + at, static_cast<size_t>(b - a) * row_bytes);
    });
    if (release) done.up_to(src + static_cast<size_t>(r1) * row_bytes);
  }
  return out;
}

}  // namespace llmctl::cpu
