// matmul_fast and matmul_fast_shared (matmul_fast.h): checks, kernel choice, and the walk of
// rows (across threads) and tokens (in L2-sized chunks) over the dtype's tile kernel; the
// activations' conversions are in matmul_activations.cpp.
#include "backend/cpu/matmul_fast.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

#include "backend/cpu/matmul_blocking.h"
#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/matmul_prepared.h"
#include "backend/cpu/weight_repack.h"
#include "core/cpu_features.h"
#include "core/error.h"

namespace llmctl::cpu {

namespace {

// Rows per thread task: at least this, rounded up to a multiple of the kernel's tile heights
// (rows_per_task(): 24 for heights 1..4 and the quantized 8, 32 for the AVX-512 16), small
// enough that 2 or 3 threads get balanced shares of a 512-row weight.
constexpr int64_t kRowsPerTask = 24;
// Prefill row blocks handed out per grab (x kRowsPerTask rows): large enough that each grab
// reuses the L2-resident token chunk over several row tiles, small enough to balance.
constexpr int64_t kPrefillGrainTasks = 4;
bool cpu_has_avx2() {
  const CpuFeatures& f = cpu_features();
  return f.avx2 && f.fma && f.f16c;
}

bool cpu_has_avx512() {
  const CpuFeatures& f = cpu_features();
  return cpu_has_avx2() && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512_vnni;
}

int64_t rows_per_task(const MatmulKernel& k) {
  const int64_t m = std::lcm<int64_t>(k.rows_decode, k.rows_prefill);
  return (kRowsPerTask + m - 1) / m * m;
}

MatmulKernel kernel_for(GgmlType type, bool avx2, MatmulPrecision precision) {
  if (precision == MatmulPrecision::Float) {
    if (type == GgmlType::F16) {
      // The F16 kernel's f32-activation tile (otherwise only for tokens that overflow f16).
      MatmulKernel k = matmul_kernel_f16(avx2);
      k.tile = k.tile_wide;
      k.half_activations = false;
      k.name = avx2 ? "f16 f32-activations avx2" : "f16 f32-activations scalar";
      return k;
    }
    // every block-quantized type: decoded rows through the F32 kernel
    if (ggml_traits(type).block_size > 1) return matmul_kernel_dequant(type, avx2);
  }
  switch (type) {
    case GgmlType::F32:
      return matmul_kernel_f32(avx2);
    case GgmlType::F16:
      return matmul_kernel_f16(avx2);
    case GgmlType::BF16:
      return matmul_kernel_bf16(avx2);
    case GgmlType::Q8_0:
      return matmul_kernel_q8_0(avx2);
    case GgmlType::Q4_0:
      return matmul_kernel_q4_0(avx2);
    case GgmlType::Q4_1:
      return matmul_kernel_q4_1(avx2);
    case GgmlType::Q2_K:
      return matmul_kernel_q2_k(avx2);
    case GgmlType::Q3_K:
      return matmul_kernel_q3_k(avx2);
    case GgmlType::Q4_K:
      return matmul_kernel_q4_k(avx2);
    case GgmlType::Q5_K:
      return matmul_kernel_q5_k(avx2);
    case GgmlType::Q6_K:
      return matmul_kernel_q6_k(avx2);
    case GgmlType::Q5_0:
      return matmul_kernel_q5_0(avx2);
    case GgmlType::Q5_1:
      return matmul_kernel_q5_1(avx2);
    case GgmlType::IQ4_NL:
      return matmul_kernel_iq4_nl(avx2);
    case GgmlType::IQ4_XS:
      return matmul_kernel_iq4_xs(avx2);
    case GgmlType::MXFP4:
      return matmul_kernel_mxfp4(avx2);
    default:
      return matmul_kernel_dequant(type, avx2);
  }
}

// The AVX-512 kernel of a dtype, or none (tile == nullptr): then its AVX2 kernel runs.
MatmulKernel avx512_kernel_for(GgmlType type, MatmulPrecision precision) {
  if (precision == MatmulPrecision::Float) {
    if (type == GgmlType::F16) {  // as kernel_for: the f32-activation tile
      MatmulKernel k = matmul_kernel_f16_avx512();
      k.tile = k.tile_wide;
      k.half_activations = false;
      k.name = "f16 f32-activations avx512";
      return k;
    }
    if (type != GgmlType::F32 && type != GgmlType::BF16) return MatmulKernel{};
  }
  switch (type) {
    case GgmlType::F32:
      return matmul_kernel_f32_avx512();
    case GgmlType::F16:
      return matmul_kernel_f16_avx512();
    case GgmlType::BF16:
      return matmul_kernel_bf16_avx512();
    case GgmlType::Q8_0:
      return matmul_kernel_q8_0_avx512();
    case GgmlType::Q4_0:
      return matmul_kernel_q4_0_avx512();
    case GgmlType::Q4_1:
      return matmul_kernel_q4_1_avx512();
    case GgmlType::Q2_K:
      return matmul_kernel_q2_k_avx512();
    case GgmlType::Q3_K:
      return matmul_kernel_q3_k_avx512();
    case GgmlType::Q4_K:
      return matmul_kernel_q4_k_avx512();
    case GgmlType::Q5_K:
      return matmul_kernel_q5_k_avx512();
    case GgmlType::Q6_K:
      return matmul_kernel_q6_k_avx512();
    case GgmlType::Q5_0:
      return matmul_kernel_q5_0_avx512();
    case GgmlType::Q5_1:
      return matmul_kernel_q5_1_avx512();
    case GgmlType::IQ4_NL:
      return matmul_kernel_iq4_nl_avx512();
    case GgmlType::IQ4_XS:
      return matmul_kernel_iq4_xs_avx512();
    case GgmlType::MXFP4:
      return matmul_kernel_mxfp4_avx512();
    default:
      return MatmulKernel{};
  }
}

// The kernels over repacked weights (weight_repack.h), per type: AVX-512, AVX2.
struct RepackedKernels {
  GgmlType type;
  MatmulKernel (*avx512)();
  MatmulKernel (*avx2)();
};
constexpr RepackedKernels kRepackedKernels[] = {
    {GgmlType::Q4_K, &matmul_kernel_q4_k_repacked, &matmul_kernel_q4_k_repacked_avx2},
    {GgmlType::Q5_K, &matmul_kernel_q5_k_repacked, &matmul_kernel_q5_k_repacked_avx2},
    {GgmlType::Q6_K, &matmul_kernel_q6_k_repacked, &matmul_kernel_q6_k_repacked_avx2},
    {GgmlType::Q3_K, &matmul_kernel_q3_k_repacked, &matmul_kernel_q3_k_repacked_avx2},
    {GgmlType::IQ4_XS, &matmul_kernel_iq4_xs_repacked, &matmul_kernel_iq4_xs_repacked_avx2},
    {GgmlType::Q2_K, &matmul_kernel_q2_k_repacked, &matmul_kernel_q2_k_repacked_avx2},
    {GgmlType::Q4_0, &matmul_kernel_q4_0_repacked, &matmul_kernel_q4_0_repacked_avx2},
    {GgmlType::Q4_1, &matmul_kernel_q4_1_repacked, &matmul_kernel_q4_1_repacked_avx2},
    {GgmlType::Q5_0, &matmul_kernel_q5_0_repacked, &matmul_kernel_q5_0_repacked_avx2},
    {GgmlType::Q5_1, &matmul_kernel_q5_1_repacked, &matmul_kernel_q5_1_repacked_avx2},
    {GgmlType::Q8_0, &matmul_kernel_q8_0_repacked, &matmul_kernel_q8_0_repacked_avx2},
    {GgmlType::IQ4_NL, &matmul_kernel_iq4_nl_repacked, &matmul_kernel_iq4_nl_repacked_avx2},
    {GgmlType::MXFP4, &matmul_kernel_mxfp4_repacked, &matmul_kernel_mxfp4_repacked_avx2},
};

// The kernel over repacked weights, or none.
MatmulKernel repacked_kernel_for(GgmlType type, MatmulIsa isa, MatmulPrecision precision) {
  if (precision != MatmulPrecision::Fast || !repack_supported(type, isa)) return MatmulKernel{};
  for (const RepackedKernels& k : kRepackedKernels)
    if (k.type == type) return isa == MatmulIsa::Avx512 ? k.avx512() : k.avx2();
  return MatmulKernel{};
}

// isa resolved (never Auto).
MatmulKernel kernel_for_isa(GgmlType type, MatmulIsa isa, MatmulPrecision precision,
                            bool repacked = false) {
  if (repacked) {
    MatmulKernel k = repacked_kernel_for(type, isa, precision);
    if (k.tile != nullptr) return k;
  }
  if (isa == MatmulIsa::Avx512) {
    MatmulKernel k = avx512_kernel_for(type, precision);
    if (k.tile != nullptr) return k;
  }
  return kernel_for(type, isa != MatmulIsa::Scalar, precision);
}

MatmulIsa isa_from_env() {
  const char* v = std::getenv("LLMCTL_MATMUL_ISA");
  const std::string s = v != nullptr ? v : "";
  if (s.empty() || s == "auto")
    return cpu_has_avx512() ? MatmulIsa::Avx512 : cpu_has_avx2() ? MatmulIsa::Avx2
                                                                 : MatmulIsa::Scalar;
  for (MatmulIsa isa : {MatmulIsa::Scalar, MatmulIsa::Avx2, MatmulIsa::Avx512})
    if (s == matmul_isa_name(isa)) return isa;
  throw Error(fmt::format("LLMCTL_MATMUL_ISA: expected auto, scalar, avx2 or avx512, got '{}'", s));
}

void check_args(const WeightView& w, const float* x, int64_t n_tokens, const float* out) {
  if (!is_engine_type(w.type) || kernel_for(w.type, false, MatmulPrecision::Fast).tile == nullptr)
    throw Error(
        fmt::format("matmul '{}': expected weight dtype F32, F16, BF16, Q8_0, Q4_0, Q4_1, "
                    "Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS or MXFP4, got {}",
                    w.name, ggml_type_name(w.type)));
  const int64_t block = ggml_traits(w.type).block_size;
  if (w.n_cols < 1 || w.n_cols % block != 0 || w.n_rows < 1)
    throw Error(
        fmt::format("matmul '{}': expected {} rows of a positive multiple of {} "
                    "elements, got [{}, {}]",
                    w.name, ggml_type_name(w.type), block, w.n_rows, w.n_cols));
  if (n_tokens < 1)
    throw Error(fmt::format("matmul '{}': expected n_tokens >= 1, got {}", w.name, n_tokens));
  if (w.data == nullptr || x == nullptr || out == nullptr)
    throw Error(fmt::format("matmul '{}': null weight, input or output pointer", w.name));
}

}  // namespace

void run_rows(const PreparedMatmul& p, int64_t n_tokens, int64_t r0, int64_t r1) {
  const MatmulKernel& k = p.k;
  const TileArgs& base = p.base;
  const uint8_t* fits = p.fits;
  const int64_t n = base.n, nb = n / 32;
  // first: the first token tile over these rows in this call or chunk, the one that reads them
  // from memory; the others find them in L2, where the software prefetch (TileArgs::prefetch)
  // would only add instructions, so they skip it.
  auto tile_with = [&](TileFn fn, int64_t r, int64_t t, int64_t n_r, int64_t n_t,
                       const uint8_t* packed, bool first) {
    TileArgs a = tile_args_from_token(base, t);
    a.panel = packed;
    if (!first) a.prefetch = 0;
    a.w = base.w + static_cast<size_t>(r) * base.w_stride;
    a.out += r;
    fn(a, static_cast<int>(n_r), static_cast<int>(n_t));
  };
  // Half-width activations: a tile whose tokens all fit f16 as usual; otherwise each token
  // alone, with the f32 tile for those that do not fit (the rare path: only the token's own
  // values decide its arithmetic, so batch invariance holds).
  auto tile = [&](int64_t r, int64_t t, int64_t n_r, int64_t n_t, const uint8_t* packed,
                  bool first) {
    if (fits == nullptr || std::all_of(fits + t, fits + t + n_t, [](uint8_t f) { return f; })) {
      tile_with(k.tile, r, t, n_r, n_t, packed, first);
      return;
    }
    for (int64_t j = t; j < t + n_t; ++j)
      tile_with(fits[j] ? k.tile : k.tile_wide, r, j, n_r, 1, packed, first && j == t);
  };
  if (n_tokens == 1) {
    for (int64_t r = r0; r < r1; r += k.rows_decode)
      tile(r, 0, std::min<int64_t>(k.rows_decode, r1 - r), 1, nullptr, true);
    return;
  }
  if (k.row_blocks) {
    // A block of rows stays in L2 while each token tile (in L1) passes over its row tiles:
    // 5 to 20 % faster than the token-chunk order for F16 at 480 tokens (one core, this tile in
    // a standalone loop; within the model the difference is below this machine's noise).
    const int64_t rows = row_block_rows(k, static_cast<int64_t>(base.w_stride));
    for (int64_t b = r0; b < r1; b += rows) {
      const int64_t e = std::min(r1, b + rows);
      for (int64_t t = 0; t < n_tokens; t += k.tokens_prefill)
        for (int64_t r = b; r < e; r += k.rows_prefill)
          tile(r, t, std::min<int64_t>(k.rows_prefill, e - r),
               std::min<int64_t>(k.tokens_prefill, n_tokens - t), nullptr, t == 0);
    }
    return;
  }
  const int64_t token_bytes = k.quantized ? n + 8 * nb : 4 * n;
  // a whole number of token tiles, so that only the batch's last tile is a narrow one
  const int64_t chunk = chunk_tokens(k, token_bytes);
  // The packed row tile (per thread; reused across calls): L2-resident while the chunk's
  // token tiles pass over it.
  thread_local std::vector<uint8_t> panel;
  if (k.pack != nullptr) panel.resize(k.panel_bytes_per_block * static_cast<size_t>(nb));
  for (int64_t c0 = 0; c0 < n_tokens; c0 += chunk) {
    const int64_t c1 = std::min(n_tokens, c0 + chunk);
    for (int64_t r = r0; r < r1; r += k.rows_prefill) {
      const int64_t n_r = std::min<int64_t>(k.rows_prefill, r1 - r);
      const uint8_t* packed = nullptr;
      if (k.pack != nullptr && c1 - c0 >= k.pack_min_tokens) {
        TileArgs a = base;
        a.w = base.w + static_cast<size_t>(r) * base.w_stride;
        k.pack(a, static_cast<int>(n_r), panel.data());
        packed = panel.data();
      }
      for (int64_t t = c0; t < c1; t += k.tokens_prefill)
        tile(r, t, n_r, std::min<int64_t>(k.tokens_prefill, c1 - t), packed, t == c0);
    }
  }
}

bool matmul_fast_int8_activations(GgmlType type, MatmulPrecision precision) {
  // the flag does not depend on the instruction set: the scalar kernel's is the same
  return kernel_for(type, false, precision).quantized;
}

bool matmul_fast_has_avx2() {
#if defined(LLMCTL_HAVE_X86)
  return cpu_has_avx2();
#else
  return false;
#endif
}

bool matmul_fast_has_avx512() {
#if defined(LLMCTL_HAVE_X86)
  return cpu_has_avx512();
#else
  return false;
#endif
}

size_t decode_prefetch_bytes() {
  static const size_t bytes = cpu_features().intel ? kKQuantPrefetchBytes : 0;
  return bytes;
}

MatmulIsa matmul_fast_auto_isa() {
  static const MatmulIsa isa = isa_from_env();
  return isa;
}

const char* matmul_isa_name(MatmulIsa isa) {
  switch (isa) {
    case MatmulIsa::Scalar:
      return "scalar";
    case MatmulIsa::Avx2:
      return "avx2";
    case MatmulIsa::Avx512:
      return "avx512";
    default:
      return "auto";
  }
}

const char* matmul_fast_kernel_name(GgmlType type, MatmulIsa isa, MatmulPrecision precision,
                                    bool repacked) {
  return kernel_for_isa(type, isa == MatmulIsa::Auto ? matmul_fast_auto_isa() : isa, precision,
                        repacked)
      .name;
}

const char* matmul_fast_kernel_name(GgmlType type, MatmulPrecision precision) {
  return matmul_fast_kernel_name(type, MatmulIsa::Auto, precision);
}

namespace {

MatmulIsa resolved_isa(MatmulIsa isa) {
  if (isa == MatmulIsa::Auto) isa = matmul_fast_auto_isa();
  if (isa == MatmulIsa::Avx2 && !matmul_fast_has_avx2())
    throw Error("matmul: the AVX2 kernels need a CPU with AVX2, FMA and F16C");
  if (isa == MatmulIsa::Avx512 && !matmul_fast_has_avx512())
    throw Error("matmul: the AVX-512 kernels need a CPU with AVX2, FMA, F16C and AVX-512 F, BW, "
                "VL, DQ and VNNI");
  return isa;
}

// The kernel and tile arguments of one weight (isa resolved); its activations still to come.
PreparedMatmul prepared(MatmulIsa isa, const WeightView& w, const float* x, int64_t n_tokens,
                        float* out, MatmulPrecision precision, const uint8_t* repacked) {
  check_args(w, x, n_tokens, out);
  PreparedMatmul p;
  p.k = kernel_for_isa(w.type, isa, precision, repacked != nullptr);
  if (repacked != nullptr && !p.k.repacked)
    throw Error(fmt::format("matmul '{}': the {} kernels of {} have no repacked layout", w.name,
                            matmul_isa_name(isa), ggml_type_name(w.type)));
  const int64_t n = w.n_cols;
  TileArgs& base = p.base;
  base = TileArgs{};
  base.w = p.k.repacked ? repacked : static_cast<const uint8_t*>(w.data);
  base.w_stride = p.k.repacked ? repacked_group_bytes(w.type, n) /
                                     static_cast<size_t>(repack_group_rows(w.type))
                               : weight_row_bytes(w.type, n);
  base.n = n;
  base.x = x;
  base.out = out;
  base.out_stride = w.n_rows;
  base.type = w.type;
  base.prefetch = decode_prefetch_bytes();
  static std::atomic<uint64_t> calls{0};
  base.call_id = ++calls;
  p.n_rows = w.n_rows;
  p.task_rows = rows_per_task(p.k);
  p.n_tasks = (w.n_rows + p.task_rows - 1) / p.task_rows;
  return p;
}

// Every row of every prepared product, in one hand-off to the pool.
// Decode: each thread a fixed contiguous share of each weight (streams the weights in order,
// nothing to balance at these sizes; thread t's share of a weight is the one matmul_fast alone
// gives it). Prefill: row blocks of all the weights on demand, so a thread slowed by a
// neighbour does not leave the other waiting at the end of every matmul.
void run_prepared(const PreparedMatmul* ps, int count, int64_t n_tokens, ThreadPool& pool) {
  auto rows = [&](const PreparedMatmul& p, int64_t b, int64_t e) {
    run_rows(p, n_tokens, b * p.task_rows, std::min(p.n_rows, e * p.task_rows));
  };
  if (n_tokens == 1) {
    const int n_threads = pool.size();
    pool.parallel_for(n_threads, [&](int64_t t0, int64_t t1, int) {
      for (int64_t t = t0; t < t1; ++t)  // more than one share: the serial fallback
        for (int j = 0; j < count; ++j) {
          int64_t b = 0, e = 0;
          ThreadPool::task_range(ps[j].n_tasks, n_threads, static_cast<int>(t), &b, &e);
          if (b < e) rows(ps[j], b, e);
        }
    });
    return;
  }
  int64_t total = 0;
  for (int j = 0; j < count; ++j) total += ps[j].n_tasks;
  pool.parallel_for_dynamic(total, kPrefillGrainTasks, [&](int64_t b, int64_t e, int) {
    int64_t first = 0;  // weight j's tasks are [first, first + n_tasks) of the total
    for (int j = 0; j < count && first < e; first += ps[j].n_tasks, ++j) {
      const int64_t lo = std::max(b, first), hi = std::min(e, first + ps[j].n_tasks);
      if (lo < hi) rows(ps[j], lo - first, hi - first);
    }
  });
}

}  // namespace

void matmul_fast_isa(MatmulIsa isa, const WeightView& w, const float* x, int64_t n_tokens,
                     float* out, ThreadPool& pool, MatmulScratch& scratch,
                     MatmulPrecision precision, const uint8_t* repacked) {
  isa = resolved_isa(isa);
  PreparedMatmul p = prepared(isa, w, x, n_tokens, out, precision, repacked);
  // The activations' conversions give the same bits on every instruction set (their headers'
  // rules); AVX2's serve the AVX-512 kernels too.
  prepare_activations(p, isa != MatmulIsa::Scalar, x, n_tokens, pool, scratch);
  run_prepared(&p, 1, n_tokens, pool);
}

void matmul_fast_shared(const MatmulJob* jobs, int count, const float* x, int64_t n_tokens,
                        ThreadPool& pool, MatmulScratch* scratch, MatmulPrecision precision,
                        MatmulIsa isa) {
  if (count < 1 || count > kMaxSharedMatmuls)
    throw Error(fmt::format("matmul_fast_shared: expected 1 to {} weights, got {}",
                            kMaxSharedMatmuls, count));
  isa = resolved_isa(isa);
  const int64_t n = jobs[0].w->n_cols;
  PreparedMatmul ps[kMaxSharedMatmuls];
  MatmulKernel chosen[kMaxSharedMatmuls];  // before prepare_activations adjusts them
  for (int j = 0; j < count; ++j) {
    const MatmulJob& job = jobs[j];
    if (job.w->n_cols != n)
      throw Error(fmt::format("matmul_fast_shared: '{}' has rows of {} elements, '{}' of {}",
                              job.w->name, job.w->n_cols, jobs[0].w->name, n));
    for (int i = 0; i < j; ++i)
      if (job.out == jobs[i].out)
        throw Error(fmt::format("matmul_fast_shared: '{}' and '{}' write the same output",
                                jobs[i].w->name, job.w->name));
    ps[j] = prepared(isa, *job.w, x, n_tokens, job.out, precision, job.repacked);
    chosen[j] = ps[j].k;
    int like = 0;
    while (like < j && !same_activations(chosen[like], chosen[j])) ++like;
    if (like < j)
      share_activations(ps[j], ps[like]);
    else
      prepare_activations(ps[j], isa != MatmulIsa::Scalar, x, n_tokens, pool, scratch[j]);
  }
  run_prepared(ps, count, n_tokens, pool);
}

void matmul_fast(const WeightView& w, const float* x, int64_t n_tokens, float* out,
                 ThreadPool& pool, MatmulScratch& scratch, MatmulPrecision precision,
                 const uint8_t* repacked) {
  matmul_fast_isa(MatmulIsa::Auto, w, x, n_tokens, out, pool, scratch, precision, repacked);
}

}  // namespace llmctl::cpu
