// llmctl svd-embed: the singular-value spectrum, per-token norms and a low-rank storage
// estimate of a model's embedding (token_embd) or output matrix (diag/svd_embed.h).
// Output: a text report (default), --json, or --csv (the spectrum table); --svg writes charts.

#include <fmt/format.h>
#include <sys/stat.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "backend/selection.h"
#include "cli/app.h"
#include "cli/cli_style.h"
#include "cli/engine_options.h"
#include "cli/interrupt.h"
#include "core/error.h"
#include "core/stop_point.h"
#include "diag/svd_embed.h"
#include "diag/svg_plot.h"
#include "io/gguf.h"
#include "model/model_loader.h"

namespace llmctl::cli {

namespace {

// The engine's -m, -t, --device (engine_options.h) and svd-embed's own.
struct SvdEmbedCliOptions : EngineOptions {
  std::string tensor = "token_embd";
  int top = 10;
  bool json = false, csv = false;
  std::string svg;
  std::string gram = "auto";
  double tolerance = 1e-6;
  int64_t rank = 0;
  std::string residual_type = "q4_0";
  bool no_low_rank = false;
};

bool is_directory(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The matrix as float32 (n_vocab, n_embd), from a GGUF tensor or a Hugging Face directory.
DenseMatrix load_matrix(const std::string& path, const std::string& which) {
  if (is_directory(path)) {
    const LoadedModel m = load_model(path);
    if (which == "output" && m.weights.output_tied)
      throw FileError(path, "has no separate output matrix: it is tied to the token embedding",
                      FileError::kNoOffset, "use --tensor token_embd");
    const WeightView& w = which == "output" ? m.weights.output : m.weights.token_embd;
    return dequantize_matrix(w.name, w.type, w.n_cols, w.n_rows, w.data);
  }
  const GgufFile f = GgufFile::open(path);
  const bool tied = which == "output" && f.find_tensor("token_embd.weight");
  return dequantize_matrix(require_matrix(
      f, which + ".weight",
      tied ? "the output projection is tied to token_embd here: use --tensor token_embd"
           : "svd-embed reads a model file (with tensors), not a vocabulary-only GGUF"));
}

std::string pct(double fraction) { return fmt::format("{:.2f}%", 100 * fraction); }

// Where the spectrum is computed: the CPU (gpu < 0) or visible GPU `gpu`.
struct ComputeDevice {
  std::string id = "cpu";  // "cpu" or "cuda:N": the JSON's "device"
  int gpu = -1;
  std::string name;  // the GPU's name
};

// The device of the backend make_backend() built for --device (auto picks GPU 0).
ComputeDevice describe_device(const Backend& backend, const std::string& device) {
  if (std::string(backend.name()) != "cuda") return {};
  const int index = device == "auto" ? 0 : cuda_device_index(device);
  const GpuProbe probe = probe_gpus();
  const std::string name = index < static_cast<int>(probe.gpus.size())
                               ? probe.gpus[static_cast<size_t>(index)].name
                               : std::string("GPU");
  return {fmt::format("cuda:{}", index), index, name};
}

void print_text(const SvdEmbedCliOptions& opt, const SvdEmbedReport& r, int threads,
                const ComputeDevice& dev) {
  const Spectrum& sp = r.spectrum;
  const SpectrumSummary& su = r.summary;
  const size_t k = sp.sigma.size();
  fmt::print("svd-embed {}  {} {}  [n_vocab {}, n_embd {}]\n", opt.model, r.tensor,
             ggml_type_name(r.type), r.n_rows, r.n_cols);
  if (dev.gpu < 0)
    fmt::print("computed on the CPU ({} BLAS threads)\n\n", threads);
  else
    fmt::print(
        "spectrum computed on the GPU {} ({}): float64 Gram by cuBLAS DGEMM, eigenvalues by "
        "cuSOLVER Dsyevd; norms and low-rank estimate on the CPU ({} threads)\n\n",
        dev.id, dev.name, threads);
  fmt::print(
      "Spectrum: {} singular values from a {} Gram matrix{}; every sigma within {:.1e} x "
      "sigma_max\n",
      k, sp.gram_precision == "f32" ? "float32-product" : "float64",
      sp.fell_back ? fmt::format(" (float32 products first: their error bound was above "
                                 "--tolerance/2 = {:.1e}, so the Gram was formed again in float64)",
                                 opt.tolerance / 2)
                   : "",
      sp.error_bound);
  fmt::print("  sigma_max {:.6g}   sigma_min {:.6g}   condition number {:.6g}\n", sp.sigma.front(),
             sp.sigma.back(), su.condition_number);
  fmt::print("  energy ranks: 90% at {}, 99% at {}, 99.9% at {} (of {})\n", su.rank90, su.rank99,
             su.rank999, k);
  fmt::print(
      "  effective rank {:.2f} (entropy of sigma / sum sigma)   stable rank {:.2f} (||E||_F^2 / "
      "sigma_max^2)\n",
      su.effective_rank, su.stable_rank);
  fmt::print("  {:>6}  {:>12}  {:>8}  {:>10}\n", "i", "sigma", "energy", "cumulative");
  for (size_t i = 0; i < std::min(k, static_cast<size_t>(opt.top)); ++i)
    fmt::print("  {:>6}  {:>12.6g}  {:>8}  {:>10}\n", i + 1, sp.sigma[i], pct(su.energy[i]),
               pct(su.cumulative[i]));
  if (k > static_cast<size_t>(opt.top))
    fmt::print("  ... {} more (--top K, --csv or --json list them)\n",
               k - static_cast<size_t>(opt.top));

  const NormStats& ns = r.norm_stats;
  fmt::print("\nToken norms (L2 of each row, {} tokens)\n", ns.n);
  fmt::print("  mean {:.4g}  sd {:.4g}  min {:.4g} (id {})  max {:.4g} (id {})\n", ns.mean, ns.sd,
             ns.min, ns.argmin, ns.max, ns.argmax);
  fmt::print("  deciles      ");
  for (size_t d = 0; d < ns.deciles.size(); ++d) fmt::print(" p{}={:.4g}", d * 10, ns.deciles[d]);
  fmt::print("\n  mean by id   ");
  for (size_t b = 0; b < ns.id_decile_means.size(); ++b)
    fmt::print(" {}+:{:.4g}", ns.id_decile_starts[b], ns.id_decile_means[b]);
  fmt::print(
      "\n  norm vs id   Pearson r {:+.3f}  Spearman rho {:+.3f}  slope {:+.4g} per 1000 ids\n",
      ns.pearson, ns.spearman, ns.slope_per_1k);
  fmt::print("  verdict      {}\n",
             ns.trend == "grows"
                 ? fmt::format("norms GROW with token id (rho >= {})", kTrendThreshold)
             : ns.trend == "shrinks"
                 ? fmt::format("norms SHRINK with token id (rho <= -{})", kTrendThreshold)
                 : fmt::format("norms do NOT grow with token id (|rho| < {})", kTrendThreshold));

  const LowRankEstimate& lr = r.low_rank;
  if (lr.done) {
    const char* q = ggml_type_name(lr.residual_type);
    fmt::print("\nLow-rank storage: rank {} in F16 + residual in {}\n", lr.rank, q);
    fmt::print(
        "  {:.2f} bits/weight ({:.3g} MB) vs {} alone {:.2f} bits/weight, F16 16 bits/weight\n",
        lr.bits_per_weight, lr.bytes / 1e6, q, lr.bits_per_weight_direct);
    fmt::print(
        "  relative Frobenius error: rank {} alone {}, with the {} residual {}, {} alone {} ({} "
        "rows measured)\n",
        lr.rank, pct(lr.truncation_error), q, pct(lr.reconstruction_error), q, pct(lr.direct_error),
        lr.rows_measured);
  } else {
    fmt::print("\nLow-rank storage: skipped ({})\n", lr.skipped);
  }
  fmt::print(
      "\nTime: gram {:.3f} s, error check {:.3f} s, eigen {:.3f} s, norms {:.3f} s, low-rank "
      "{:.3f} s, total {:.3f} s\n",
      sp.seconds_gram, sp.seconds_check, sp.seconds_eigen, r.seconds_norms, r.seconds_low_rank,
      r.seconds_total);
}

nlohmann::json finite_or_null(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
}

void print_json(const SvdEmbedCliOptions& opt, const SvdEmbedReport& r, int threads,
                const ComputeDevice& dev) {
  const Spectrum& sp = r.spectrum;
  const SpectrumSummary& su = r.summary;
  const NormStats& ns = r.norm_stats;
  nlohmann::json by_id = nlohmann::json::array();
  for (size_t b = 0; b < ns.id_decile_means.size(); ++b)
    by_id.push_back({{"first_id", ns.id_decile_starts[b]}, {"mean", ns.id_decile_means[b]}});
  nlohmann::json j{{"model", opt.model},
                   {"tensor", r.tensor},
                   {"type", ggml_type_name(r.type)},
                   {"n_vocab", r.n_rows},
                   {"n_embd", r.n_cols},
                   {"device", dev.id},
                   {"device_name", dev.gpu < 0 ? "CPU" : dev.name},
                   {"device_requested", opt.device},
                   {"blas_threads", threads},
                   {"spectrum",
                    {{"sigma", sp.sigma},
                     {"energy", su.energy},
                     {"cumulative_energy", su.cumulative},
                     {"rank_90", su.rank90},
                     {"rank_99", su.rank99},
                     {"rank_999", su.rank999},
                     {"effective_rank", su.effective_rank},
                     {"stable_rank", su.stable_rank},
                     {"condition_number", finite_or_null(su.condition_number)},
                     {"gram_precision", sp.gram_precision},
                     {"fell_back_to_f64", sp.fell_back},
                     {"gram_error_norm", sp.gram_error_norm},
                     {"error_bound", sp.error_bound}}},
                   {"norms",
                    {{"mean", ns.mean},
                     {"sd", ns.sd},
                     {"min", ns.min},
                     {"argmin", ns.argmin},
                     {"max", ns.max},
                     {"argmax", ns.argmax},
                     {"deciles", ns.deciles},
                     {"by_id_decile", by_id},
                     {"pearson", ns.pearson},
                     {"spearman", ns.spearman},
                     {"slope_per_1000_ids", ns.slope_per_1k},
                     {"trend", ns.trend},
                     {"grows_with_id", ns.trend == "grows"},
                     {"values", r.norms}}},
                   {"seconds",
                    {{"gram", sp.seconds_gram},
                     {"check", sp.seconds_check},
                     {"eigen", sp.seconds_eigen},
                     {"norms", r.seconds_norms},
                     {"low_rank", r.seconds_low_rank},
                     {"total", r.seconds_total}}}};
  const LowRankEstimate& lr = r.low_rank;
  if (lr.done) {
    j["low_rank"] = {{"rank", lr.rank},
                     {"residual_type", ggml_type_name(lr.residual_type)},
                     {"bytes", lr.bytes},
                     {"bytes_f16", lr.bytes_f16},
                     {"bytes_direct", lr.bytes_direct},
                     {"bits_per_weight", lr.bits_per_weight},
                     {"bits_per_weight_direct", lr.bits_per_weight_direct},
                     {"truncation_error", lr.truncation_error},
                     {"reconstruction_error", lr.reconstruction_error},
                     {"direct_error", lr.direct_error},
                     {"rows_measured", lr.rows_measured}};
  } else {
    j["low_rank"] = {{"skipped", lr.skipped}};
  }
  fmt::print("{}\n", j.dump());
}

void print_csv(const SvdEmbedReport& r) {
  fmt::print("i,sigma,energy,cumulative_energy\n");
  for (size_t i = 0; i < r.spectrum.sigma.size(); ++i)
    fmt::print("{},{:.17g},{:.17g},{:.17g}\n", i + 1, r.spectrum.sigma[i], r.summary.energy[i],
               r.summary.cumulative[i]);
}

// BASE-spectrum.svg, BASE-energy.svg, BASE-norms.svg for --svg BASE[.svg].
void write_charts(const std::string& path, const SvdEmbedReport& r) {
  std::string base = path;
  if (base.size() > 4 && base.compare(base.size() - 4, 4, ".svg") == 0)
    base.resize(base.size() - 4);
  std::vector<double> idx;
  for (size_t i = 0; i < r.spectrum.sigma.size(); ++i) idx.push_back(static_cast<double>(i + 1));
  SvgPlot spectrum{
      fmt::format("Singular values of {}", r.tensor), "index i", "sigma_i", false, true,
      {{"sigma", idx, r.spectrum.sigma, false}}};
  SvgPlot energy{fmt::format("Cumulative energy of {}", r.tensor),
                 "rank r",
                 "sum of sigma^2 up to r / total",
                 false,
                 false,
                 {{"cumulative energy", idx, r.summary.cumulative, false}}};
  std::vector<double> ids;
  for (size_t i = 0; i < r.norms.size(); ++i) ids.push_back(static_cast<double>(i));
  std::vector<double> bucket_x, bucket_y;
  const NormStats& ns = r.norm_stats;
  for (size_t b = 0; b < ns.id_decile_means.size(); ++b) {
    const double end = b + 1 < ns.id_decile_starts.size()
                           ? static_cast<double>(ns.id_decile_starts[b + 1])
                           : static_cast<double>(ns.n);
    bucket_x.push_back((static_cast<double>(ns.id_decile_starts[b]) + end) / 2);
    bucket_y.push_back(ns.id_decile_means[b]);
  }
  SvgPlot norms{
      fmt::format("Token norms vs id ({}; Spearman rho {:+.3f})", r.tensor, ns.spearman),
      "token id",
      "L2 norm",
      false,
      false,
      {{"per token", ids, r.norms, true}, {"mean per tenth of ids", bucket_x, bucket_y, false}}};
  for (const auto& [suffix, plot] :
       {std::pair<const char*, const SvgPlot*>{"-spectrum.svg", &spectrum},
        {"-energy.svg", &energy},
        {"-norms.svg", &norms}}) {
    write_svg(base + suffix, *plot);
    fmt::print(stderr, "llmctl: wrote {}{}\n", base, suffix);
  }
}

int run_svd_embed(const SvdEmbedCliOptions& opt) {
  require_model_path(opt.model);
  // Ctrl-C: the Gram matrix stops between blocks (core/stop_point.h), no chart is written.
  install_interrupt_handler();
  // The backend first (a bad --device fails before the slow load); it computes the Gram
  // matrix and its eigen-decomposition (backend.h gram_eigen).
  const int threads = opt.threads > 0 ? opt.threads : default_cpu_threads();
  const std::unique_ptr<Backend> backend = make_backend(backend_choice(opt, threads));
  const ComputeDevice dev = describe_device(*backend, opt.device);
  const std::optional<GgmlType> residual = ggml_type_from_name(opt.residual_type);
  if (!residual)
    throw CLI::ValidationError("--residual-type",
                               fmt::format("unknown type '{}'", opt.residual_type));
  const DenseMatrix e = load_matrix(opt.model, opt.tensor);
  SvdEmbedOptions so;
  so.spectrum.gram = opt.gram == "f64" ? GramPrecision::F64 : GramPrecision::Auto;
  so.spectrum.tolerance = opt.tolerance;
  so.low_rank = !opt.no_low_rank;
  so.low_rank_options.rank = opt.rank;
  so.low_rank_options.residual_type = *residual;
  stop_point();
  const SvdEmbedReport r = analyze_embedding(*backend, e, so);
  stop_point();  // after the eigen solve and the low-rank check, before any output
  if (!opt.svg.empty()) write_charts(opt.svg, r);
  if (opt.json)
    print_json(opt, r, threads, dev);
  else if (opt.csv)
    print_csv(r);
  else
    print_text(opt, r, threads, dev);
  return kExitOk;
}

}  // namespace

void add_svd_embed_command(CLI::App& app, Action& action) {
  static SvdEmbedCliOptions opt;
  CLI::App* sub = app.add_subcommand("svd-embed",
                                     "Singular-value spectrum, token-norm statistics and low-rank "
                                     "storage of the embedding matrix");
  sub->footer(R"(Examples:
  llmctl svd-embed -m stories260K.gguf
  llmctl svd-embed -m model.gguf --tensor output --top 20 --svg charts/output
  llmctl svd-embed -m model.gguf --json > report.json

What it prints (E is the chosen matrix, n_vocab x n_embd, dequantized to float32):
  Spectrum     every singular value sigma_i of E (--csv lists them all, --json too), from the
               eigenvalues of the Gram matrix E^T E in float64 (LAPACK dsyev_2stage).
  Accuracy     each sigma is within the printed bound x sigma_max of a float64 SVD. The Gram is
               first formed from float32 products (fast); its rounding error is then measured
               (power iteration on G32 - E^T E with E^T E x in float64) and turned into a bound
               per sigma (Weyl). Above --tolerance/2 the Gram is recomputed from float64
               products. --gram f64 always does.
  energy       sigma_i^2 / sum sigma^2; cumulative energy up to i; the ranks at 90/99/99.9%
               are the smallest r whose cumulative energy reaches that fraction.
  effective rank   exp(entropy of sigma_i / sum sigma) (Roy & Vetterli); stable rank
               ||E||_F^2 / sigma_max^2; condition number sigma_max / sigma_min.
  Token norms  L2 norm of each row: mean, sd, extremes, deciles of the distribution, the mean
               over each tenth of the id range, and the Pearson and Spearman correlation of
               norm with token id. Verdict: norms grow with id when Spearman rho >= 0.1,
               shrink when rho <= -0.1, else they do not grow.
  Low-rank     E ~ C V_r^T (rank r, both factors in F16) + the residual quantized in
               --residual-type: bits per weight and relative Frobenius error, against the
               residual type alone; the rank-r truncation error comes from the spectrum.
  --svg B      writes B-spectrum.svg (sigma, log y), B-energy.svg (cumulative energy) and
               B-norms.svg (norm vs token id).

Device       --device cuda[:N] forms the Gram matrix on that GPU from float64 products (cuBLAS
               DGEMM) and solves it with cuSOLVER Dsyevd (eigenvectors too for the low-rank
               estimate); --gram and --tolerance then change nothing (float64 costs
               milliseconds there) and the bound is that of --gram f64. auto: the first
               visible GPU, else the CPU. Needs a CUDA build and libcublas/libcusolver at run
               time; the JSON's "device" says where the spectrum was computed.
Exit codes: 0 ok, 1 bad model file or error, 2 usage error, 130 stopped by Ctrl-C.)");
  add_engine_options(sub, opt, {kModel | kThreads | kDevice});
  sub->get_option("--device")
      ->description(
          "auto (a visible GPU, else the CPU), cpu or cuda[:N]: where the Gram matrix "
          "and its eigenvalues are computed (float64 on a GPU)");
  sub->add_option("--tensor", opt.tensor, "Matrix to analyse: token_embd or output")
      ->check(one_of({"token_embd", "output"}))
      ->capture_default_str();
  sub->add_option("--top", opt.top, "Singular values listed in the text report")
      ->check(in_range(1, 1000000))
      ->capture_default_str();
  auto* json =
      sub->add_flag("--json", opt.json, "JSON report (every value, per-token norms included)");
  sub->add_flag("--csv", opt.csv,
                "CSV of the spectrum: i, sigma, energy, cumulative_energy (not with --json)")
      ->excludes(json);
  sub->add_option("--svg", opt.svg,
                  "Write charts BASE-spectrum.svg, BASE-energy.svg, BASE-norms.svg")
      ->type_name("BASE");
  sub->add_option("--gram", opt.gram,
                  "Gram products: auto (float32, checked, float64 when needed) or f64")
      ->check(one_of({"auto", "f64"}))
      ->capture_default_str();
  sub->add_option("--tolerance", opt.tolerance, "Target max |d sigma| / sigma_max")
      ->check(in_range(1e-12, 1.0))
      ->capture_default_str();
  sub->add_option("--rank", opt.rank, "Low-rank estimate's rank (0: the 90%-energy rank)")
      ->check(at_least(int64_t{0}))
      ->capture_default_str();
  sub->add_option("--residual-type", opt.residual_type,
                  "Low-rank residual type: q4_0, q5_0, q8_0, q4_k ...")
      ->capture_default_str()
      ->type_name("TYPE");
  sub->add_flag("--no-low-rank", opt.no_low_rank, "Skip the low-rank storage estimate");
  sub->callback([&action] { action = [] { return run_svd_embed(opt); }; });
}

}  // namespace llmctl::cli
