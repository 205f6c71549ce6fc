// bench_svd_embed: times svd-embed's spectrum (diag/gram_eigen.h on the CPU backend) on a
// random float32 matrix and writes the matrix and the singular values for
// tools/svd_numpy_reference.py, which times numpy on the same matrix and reports the largest
// difference.
//
//   bench_svd_embed [--rows 32000] [--cols 2048] [--seed 1] [-t THREADS] [--repeat 3]
//                   [--gram auto|f64] [--save-matrix A.npy] [--save-sigma sigma.txt]
//                   [--save-gguf A.gguf]
//
// Entries are standard normal (std::normal_distribution over mt19937_64, then rounded to
// float32); the .npy holds exactly the float32 values the spectrum saw. Prints one line per
// run and the median; the load average is printed too, as the machine may be shared.
// --save-gguf writes the matrix as the F32 tensor token_embd.weight of a GGUF (ggml shape
// [cols, rows]), for timing `llmctl svd-embed` itself (scripts/gpu-check.sh: --device cuda);
// with --repeat 0 nothing is timed, the files are only written.

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_fast_backend.h"
#include "core/error.h"
#include "diag/gram_eigen.h"
#include "io/gguf_writer.h"

namespace {

void save_npy(const std::string& path, const std::vector<float>& a, int64_t rows, int64_t cols) {
  std::string header =
      fmt::format("{{'descr': '<f4', 'fortran_order': False, 'shape': ({}, {}), }}", rows, cols);
  // Magic (6) + version (2) + header length (2) + header + '\n', padded to a multiple of 64.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::ofstream f(path, std::ios::binary);
  if (!f) throw llmctl::FileError(path, "cannot open for writing");
  const char magic[] = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0};
  f.write(magic, sizeof magic);
  const uint16_t len = static_cast<uint16_t>(header.size());
  const char len_le[2] = {static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
  f.write(len_le, 2);
  f.write(header.data(), static_cast<std::streamsize>(header.size()));
  f.write(reinterpret_cast<const char*>(a.data()),
          static_cast<std::streamsize>(a.size() * sizeof(float)));
  if (!f) throw llmctl::FileError(path, "write failed");
}

void save_gguf(const std::string& path, const std::vector<float>& a, int64_t rows, int64_t cols) {
  llmctl::GgufBuilder b;
  b.set("general.architecture", llmctl::gguf_value::string("llama"));
  b.set("general.name",
        llmctl::gguf_value::string(fmt::format("bench_svd_embed random {} x {}", rows, cols)));
  std::vector<uint8_t> bytes(a.size() * sizeof(float));
  std::memcpy(bytes.data(), a.data(), bytes.size());
  b.add_tensor("token_embd.weight", llmctl::GgmlType::F32, {cols, rows}, std::move(bytes));
  b.write(path);
}

std::string load_average() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Time svd-embed's singular values on a random float32 matrix"};
  int64_t rows = 32000, cols = 2048;
  uint64_t seed = 1;
  int threads = 2, repeat = 3;
  std::string gram = "auto", matrix_path, sigma_path, gguf_path;
  app.add_option("--rows", rows, "rows (vocabulary size)")->check(CLI::PositiveNumber);
  app.add_option("--cols", cols, "columns (n_embd)")->check(CLI::PositiveNumber);
  app.add_option("--seed", seed, "random seed");
  app.add_option("-t,--threads", threads, "BLAS threads")->check(CLI::PositiveNumber);
  app.add_option("--repeat", repeat, "timed runs (0: only write the --save-* files)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--gram", gram, "Gram precision")->check(CLI::IsMember({"auto", "f64"}));
  app.add_option("--save-matrix", matrix_path, "write the matrix as .npy");
  app.add_option("--save-sigma", sigma_path, "write the singular values, one per line");
  app.add_option("--save-gguf", gguf_path, "write the matrix as token_embd.weight (F32) of a GGUF");
  CLI11_PARSE(app, argc, argv);
  try {
    std::vector<float> a(static_cast<size_t>(rows * cols));
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> normal;
    for (float& v : a) v = static_cast<float>(normal(rng));
    if (!matrix_path.empty()) save_npy(matrix_path, a, rows, cols);
    if (!gguf_path.empty()) save_gguf(gguf_path, a, rows, cols);
    if (repeat == 0) return 0;
    llmctl::SpectrumOptions opt;
    opt.gram = gram == "f64" ? llmctl::GramPrecision::F64 : llmctl::GramPrecision::Auto;
    llmctl::cpu::CpuFastBackend cpu(threads);  // BLAS on `threads` threads
    std::vector<double> times;
    llmctl::Spectrum s;
    for (int r = 0; r < repeat; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      s = llmctl::singular_values(cpu, a.data(), rows, cols, opt);
      double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      times.push_back(t);
      fmt::print(
          "run {}: {:.3f} s (gram {} {:.3f} s, check {:.3f} s, eigen {:.3f} s; bound {:.2e}; load "
          "{})\n",
          r + 1, t, s.gram_precision, s.seconds_gram, s.seconds_check, s.seconds_eigen,
          s.error_bound, load_average());
    }
    std::sort(times.begin(), times.end());
    fmt::print(
        "median {:.3f} s over {} runs ({} x {}, {} threads, gram {}); sigma_max {:.6g}, sigma_min "
        "{:.6g}\n",
        times[times.size() / 2], repeat, rows, cols, threads, s.gram_precision, s.sigma.front(),
        s.sigma.back());
    if (!sigma_path.empty()) {
      std::ofstream f(sigma_path);
      for (double v : s.sigma) f << fmt::format("{:.17g}\n", v);
      if (!f) throw llmctl::FileError(sigma_path, "write failed");
    }
  } catch (const llmctl::Error& e) {
    fmt::print(stderr, "bench_svd_embed: error: {}\n", e.what());
    return 1;
  }
  return 0;
}
