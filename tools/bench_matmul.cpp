// bench_matmul: speed of the CPU matmul fast path (src/backend/cpu/matmul_fast.h) on the
// Llama-3.2-1B shapes, against the scalar reference loop.
//
// Options: kUsage below (bench_matmul --help). A benchmark, never a test.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu/compute_probe.h"
#include "backend/cpu/matmul_fast.h"
#include "backend/cpu/weight_repack.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/fp16.h"
#include "quant/dequant.h"
#include "quant/quantize.h"

using namespace llmctl;
using namespace llmctl::cpu;

namespace {

constexpr const char* kUsage = R"(Usage:
  bench_matmul [--types q4_0,q8_0,...] [--threads 1,2] [--reps N] [--prefill N]
               [--vocab] [--no-ref] [--cpu-time] [--shapes DxN,DxN,...]
               [--isa auto|scalar|avx2|avx512] [--repack off|on|both] [--copies N]
               [--peak]

For each dtype, each weight shape W (d, n) of a layer (q/o 2048x2048, k/v 512x2048,
gate/up 8192x2048, down 2048x8192; with --vocab also the output 128256x2048; --shapes: these
D x N shapes instead):
  decode  (n_tokens = 1): median ms over reps; GB/s = weight bytes / median. Enough copies of
          the weight rotate so that they do not fit in the last-level cache (at least 256 MiB
          and twice the largest cache: a 2-core Xeon VM here sees 260 MiB of L3): every byte
          comes from memory, as in a real model whose layers together are far bigger than L3.
  --copies N  rotate N copies instead; 1 keeps a weight that fits in a cache there, which
          separates what the kernel's arithmetic costs from what waiting on memory costs.
  prefill (n_tokens = --prefill, 512, at least 2): median ms; GFLOP/s = 2 * d * n * n_tokens /
          median. The copies rotate too: a small batch (a few tokens) is bound by memory as
          decode is, and read from L3 it looked up to twice as fast as in a model.
  --isa   the kernels' instruction set (matmul_fast_isa; default auto: matmul_fast's choice,
          LLMCTL_MATMUL_ISA included); the kernel's name is printed per dtype.
  --repack  the weights as the GGUF has them (off, the default), repacked as the fast CPU
          backend holds them (on: weight_repack.h; types and isas without a repacked layout
          stay off), or both, one line each from the same run ("layout" column).
  --peak  measure the compute peak (compute_probe.h) at each thread count first, and give
          each prefill line its "% of peak": int8 ops for the kernels with int8 activations,
          f32 FMAs for the others, as `llmctl bench` does.
  "best" is the same figure from the fastest repetition: on a shared machine it is closer
  to what the code does alone than the median is.
  ref     the scalar reference (cpu_backend.cpp's matmul: dequantize a row, f32 dot), one
          token, one thread; its prefill time is n_tokens times that (it has no batching).
Weights are random normal values quantized in memory (IQ4_NL, IQ4_XS, which llmctl does not
write: random bytes with small scales). A benchmark, never a test.)";

// A bad command line: exit 2, as llmctl's usage errors (other errors exit 1).
struct UsageError : Error {
  using Error::Error;
};

struct Shape {
  const char* name;
  int64_t d, n;
};

struct Options {
  std::vector<GgmlType> types{GgmlType::F32,  GgmlType::F16,  GgmlType::BF16,
                              GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1};
  std::vector<int> threads{1, 2};
  int reps = 20;
  int64_t prefill = 512;
  bool vocab = false, ref = true;
  std::vector<std::pair<int64_t, int64_t>> shapes;  // --shapes (d, n); empty: the defaults
  MatmulIsa isa = MatmulIsa::Auto;
  std::vector<bool> repack{false};  // --repack: the layouts to time
  size_t copies = 0;                // --copies; 0: enough to overflow the largest cache
  bool peak = false;                // --peak
  bool help = false;                // -h, --help
};

bool g_cpu_time = false;  // --cpu-time

// Wall-clock seconds, or with --cpu-time the calling thread's CPU seconds (clock_gettime's
// CLOCK_THREAD_CPUTIME_ID): on a machine shared with other jobs, time spent descheduled is
// not counted. Only meaningful with --threads 1 (the other threads' work is not counted).
double now_s() {
  if (g_cpu_time) {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// A weight and enough byte-identical copies (distinct addresses) to overflow the caches.
struct Weights {
  size_t bytes = 0;
  std::vector<std::vector<uint8_t>> copies;
};

size_t row_bytes_of(GgmlType type, int64_t n) {
  const GgmlTypeTraits tr = ggml_traits(type);
  return static_cast<size_t>(n) / tr.block_size * tr.type_size;
}

// IQ4_NL and IQ4_XS, which quantize_row does not write: random bytes, and each block's fp16 d
// (byte 0 in both layouts) a small normal number, so that no product is subnormal or NaN.
void random_iq4_rows(GgmlType type, std::vector<uint8_t>& bytes, std::mt19937& rng) {
  std::uniform_int_distribution<int> byte(0, 255);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(byte(rng));
  const size_t bs = ggml_traits(type).type_size;
  for (size_t blk = 0; blk < bytes.size(); blk += bs) {
    const uint16_t h = f32_to_fp16(0.0005f * static_cast<float>(1 + byte(rng) % 8));
    bytes[blk] = static_cast<uint8_t>(h & 0xff);
    bytes[blk + 1] = static_cast<uint8_t>(h >> 8);
  }
}

Weights make_weights(GgmlType type, const Shape& s, size_t copies, std::mt19937& rng) {
  Weights w;
  const size_t row_bytes = row_bytes_of(type, s.n);
  w.bytes = row_bytes * static_cast<size_t>(s.d);
  std::vector<uint8_t> first(w.bytes);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  std::vector<float> row(static_cast<size_t>(s.n));
  if (type == GgmlType::IQ4_NL || type == GgmlType::IQ4_XS)
    random_iq4_rows(type, first, rng);
  else
    for (int64_t r = 0; r < s.d; ++r) {
      for (float& v : row) v = dist(rng);
      quantize_row(type, row.data(), first.data() + static_cast<size_t>(r) * row_bytes, s.n);
    }
  const size_t target =
      std::max(size_t{256} << 20, 2 * static_cast<size_t>(cpu_largest_cache_bytes()));
  const size_t n_copies = copies > 0 ? copies : std::clamp<size_t>(target / w.bytes, 1, 1024);
  w.copies.push_back(std::move(first));
  for (size_t i = 1; i < n_copies; ++i) w.copies.push_back(w.copies[0]);
  return w;
}

// The reference: dequantize each row, f32 dot product (cpu_backend.cpp), one token.
void reference_matmul(GgmlType type, const uint8_t* w, const Shape& s, const float* x, float* out,
                      std::vector<float>& row) {
  const size_t row_bytes = row_bytes_of(type, s.n);
  for (int64_t r = 0; r < s.d; ++r) {
    dequantize_row(type, w + static_cast<size_t>(r) * row_bytes, row.data(), s.n);
    float acc = 0.0f;
    for (int64_t i = 0; i < s.n; ++i) acc += row[static_cast<size_t>(i)] * x[i];
    out[r] = acc;
  }
}

// The compute peak of each thread pool (--peak; empty without it).
using Peaks = std::vector<ComputeResult>;

void bench_shape(GgmlType type, const Shape& s, const Options& o, std::mt19937& rng,
                 std::vector<ThreadPool*>& pools, const Peaks& peaks) {
  const Weights w = make_weights(type, s, o.copies, rng);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(o.prefill * s.n));
  for (float& v : x) v = dist(rng);
  std::vector<float> out(static_cast<size_t>(o.prefill * s.d));
  MatmulScratch scratch;
  const double gb = static_cast<double>(w.bytes) * 1e-9;
  const double gflop = 2.0 * static_cast<double>(s.d * s.n * o.prefill) * 1e-9;

  double ref_ms = 0.0;
  if (o.ref) {
    std::vector<float> row(static_cast<size_t>(s.n));
    std::vector<double> t;
    for (int i = 0; i < std::max(3, o.reps / 4); ++i) {
      const double t0 = now_s();
      reference_matmul(type, w.copies[static_cast<size_t>(i) % w.copies.size()].data(), s, x.data(),
                       out.data(), row);
      t.push_back(now_s() - t0);
    }
    ref_ms = median(t) * 1e3;
  }
  const MatmulIsa isa = o.isa == MatmulIsa::Auto ? matmul_fast_auto_isa() : o.isa;
  std::vector<RepackedWeight> packed;  // per copy, when a timed layout is repacked
  for (bool rp : o.repack)
    if (rp && packed.empty() && repack_supported(type, isa))
      for (const auto& c : w.copies)
        packed.push_back(repack_weight(WeightView{"w", type, s.n, s.d, c.data()}, *pools[0]));
  const bool int8 = matmul_fast_int8_activations(type, MatmulPrecision::Fast);
  for (size_t pi = 0; pi < pools.size(); ++pi)
    for (bool rp : o.repack) {
      ThreadPool* pool = pools[pi];
      if (rp && packed.empty()) continue;  // no repacked layout: the off line says it all
      auto call = [&](size_t copy, int64_t n_tokens) {
        const WeightView v{"w", type, s.n, s.d, w.copies[copy % w.copies.size()].data()};
        const uint8_t* r = rp ? packed[copy % packed.size()].data() : nullptr;
        const double t0 = now_s();
        matmul_fast_isa(o.isa, v, x.data(), n_tokens, out.data(), *pool, scratch,
                        MatmulPrecision::Fast, r);
        return now_s() - t0;
      };
      std::vector<double> dec, pre;
      for (size_t i = 0; i < w.copies.size(); ++i) call(i, 1);  // warm-up: page in every copy
      for (int i = 0; i < o.reps; ++i) dec.push_back(call(static_cast<size_t>(i), 1));
      const int pre_reps = std::max(3, o.reps / 4);
      call(0, o.prefill);
      for (int i = 0; i < pre_reps; ++i) pre.push_back(call(static_cast<size_t>(i), o.prefill));
      const double dec_ms = median(dec) * 1e3, pre_ms = median(pre) * 1e3;
      const double dec_min = *std::min_element(dec.begin(), dec.end()) * 1e3;
      const double pre_min = *std::min_element(pre.begin(), pre.end()) * 1e3;
      fmt::print(
          "{:<5} {:<6} {:>6}x{:<5} {} thr {:<8} | decode {:7.3f} ms {:5.1f} GB/s (best {:5.1f}) | "
          "prefill{:>4} {:8.2f} ms {:6.1f} GFLOP/s (best {:6.1f})",
          ggml_type_name(type), s.name, s.d, s.n, pool->size(), rp ? "repacked" : "gguf", dec_ms,
          gb / (dec_ms * 1e-3), gb / (dec_min * 1e-3), o.prefill, pre_ms, gflop / (pre_ms * 1e-3),
          gflop / (pre_min * 1e-3));
      if (!peaks.empty()) {
        const double peak = int8 ? peaks[pi].gop_s_int8 : peaks[pi].gflop_s_f32_fma;
        fmt::print(" {:3.0f}% of the {} peak", 100.0 * gflop / (pre_ms * 1e-3) / peak,
                   int8 ? "int8" : "f32");
      }
      if (o.ref)
        fmt::print(" | ref {:8.2f} ms {:5.1f} GB/s x{:.0f} decode, x{:.0f} prefill", ref_ms,
                   gb / (ref_ms * 1e-3), ref_ms / dec_ms,
                   ref_ms * static_cast<double>(o.prefill) / pre_ms);
      fmt::print("\n");
      std::fflush(stdout);
    }
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> parts;
  size_t b = 0;
  while (b <= s.size()) {
    const size_t e = std::min(s.find(',', b), s.size());
    parts.push_back(s.substr(b, e - b));
    b = e + 1;
  }
  return parts;
}

// The whole of v as a number from min to max, or an Error naming the option.
int64_t count_arg(const std::string& opt, const std::string& v, int64_t min,
                  int64_t max = std::numeric_limits<int64_t>::max()) {
  int64_t c = 0;
  const char* end = v.data() + v.size();
  const auto [p, ec] = std::from_chars(v.data(), end, c);
  if (ec != std::errc() || p != end || c < min || c > max)
    throw UsageError(fmt::format("bench_matmul: {} expects a whole number {}, got '{}'", opt,
                                 max == std::numeric_limits<int64_t>::max()
                                     ? fmt::format(">= {}", min)
                                     : fmt::format("from {} to {}", min, max),
                                 v));
  return c;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      o.help = true;
      return o;
    }
    if (a == "--vocab") {
      o.vocab = true;
      continue;
    }
    if (a == "--cpu-time") {
      g_cpu_time = true;
      continue;
    }
    if (a == "--no-ref") {
      o.ref = false;
      continue;
    }
    if (a == "--peak") {
      o.peak = true;
      continue;
    }
    if (i + 1 >= argc) throw UsageError(fmt::format("bench_matmul: {} needs a value", a));
    const std::string v = argv[++i];
    if (a == "--types") {
      o.types.clear();
      for (const std::string& t : split(v)) {
        const auto type = ggml_type_from_name(t);
        if (!type) throw UsageError(fmt::format("bench_matmul: unknown type '{}'", t));
        o.types.push_back(*type);
      }
    } else if (a == "--threads") {
      o.threads.clear();
      for (const std::string& t : split(v))
        o.threads.push_back(static_cast<int>(count_arg(a, t, 1, 1024)));
    } else if (a == "--isa") {
      bool known = false;
      for (MatmulIsa isa :
           {MatmulIsa::Auto, MatmulIsa::Scalar, MatmulIsa::Avx2, MatmulIsa::Avx512})
        if (v == matmul_isa_name(isa)) {
          o.isa = isa;
          known = true;
        }
      if (!known) throw UsageError(fmt::format("bench_matmul: unknown --isa '{}'", v));
    } else if (a == "--repack") {
      if (v == "off")
        o.repack = {false};
      else if (v == "on")
        o.repack = {true};
      else if (v == "both")
        o.repack = {false, true};
      else
        throw UsageError(
            fmt::format("bench_matmul: --repack expects off, on or both, got '{}'", v));
    } else if (a == "--copies") {
      o.copies = static_cast<size_t>(count_arg(a, v, 1));
    } else if (a == "--reps") {
      o.reps = static_cast<int>(count_arg(a, v, 1, std::numeric_limits<int>::max()));
    } else if (a == "--shapes") {
      for (const std::string& t : split(v)) {
        const size_t x = t.find('x');
        if (x == std::string::npos)
          throw UsageError(fmt::format("bench_matmul: --shapes expects DxN, got '{}'", t));
        o.shapes.emplace_back(count_arg(a, t.substr(0, x), 1, int64_t{1} << 24),
                              count_arg(a, t.substr(x + 1), 1, int64_t{1} << 24));
      }
    } else if (a == "--prefill") {
      o.prefill = count_arg(a, v, 2);
    } else {
      throw UsageError(fmt::format("bench_matmul: unknown option {}", a));
    }
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    if (o.help) {
      fmt::print("{}", kUsage);
      return 0;
    }
    std::vector<Shape> shapes{{"attn_q", 2048, 2048},
                              {"attn_k", 512, 2048},
                              {"ffn_up", 8192, 2048},
                              {"ffn_dn", 2048, 8192}};
    if (o.vocab) shapes.push_back({"output", 128256, 2048});
    if (!o.shapes.empty()) {
      shapes.clear();
      for (const auto& [d, n] : o.shapes) shapes.push_back({"shape", d, n});
    }
    std::vector<std::unique_ptr<ThreadPool>> owned;
    std::vector<ThreadPool*> pools;
    for (int t : o.threads) {
      owned.push_back(std::make_unique<ThreadPool>(t));
      pools.push_back(owned.back().get());
    }
    fmt::print("cpu: {}; features:", cpu_model_name());
    for (const std::string& f : cpu_feature_names(cpu_features())) fmt::print(" {}", f);
    fmt::print("\n");
    for (ThreadPool* pool : pools) {  // the fixed cost of one parallel_for
      std::vector<double> t;
      for (int i = 0; i < 2000; ++i) {
        const double t0 = now_s();
        pool->parallel_for(pool->size(), [](int64_t, int64_t, int) {});
        t.push_back(now_s() - t0);
      }
      fmt::print("thread pool: {} threads, empty parallel_for median {:.2f} us (best {:.2f})\n",
                 pool->size(), median(t) * 1e6, *std::min_element(t.begin(), t.end()) * 1e6);
    }
    Peaks peaks;
    if (o.peak)
      for (ThreadPool* pool : pools) {
        peaks.push_back(measure_compute_peak(pool->size(), 5, o.isa));
        fmt::print("compute peak ({}, {} threads): f32 FMA {:.1f} GFLOP/s, int8 {:.1f} GOP/s\n",
                   peaks.back().isa, pool->size(), peaks.back().gflop_s_f32_fma,
                   peaks.back().gop_s_int8);
      }
    std::mt19937 rng(42);
    for (GgmlType type : o.types) {
      fmt::print("# {}: kernel {}", ggml_type_name(type), matmul_fast_kernel_name(type, o.isa));
      for (bool rp : o.repack)
        if (rp && repack_supported(type, o.isa == MatmulIsa::Auto ? matmul_fast_auto_isa() : o.isa))
          fmt::print("; repacked: {}",
                     matmul_fast_kernel_name(type, o.isa, MatmulPrecision::Fast, true));
      fmt::print("\n");
      for (const Shape& s : shapes) bench_shape(type, s, o, rng, pools, peaks);
    }
    return 0;
  } catch (const UsageError& e) {
    fmt::print(stderr, "{} (bench_matmul --help lists the options)\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "bench_matmul: error: {}\n", e.what());
    return 1;
  }
}
