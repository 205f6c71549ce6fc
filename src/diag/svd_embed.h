#pragma once
// svd-embed's analysis of an embedding matrix E (n_vocab, n_embd): its singular-value
// spectrum (diag/gram_eigen.h), what the spectrum says about rank, the per-token norms against
// the token id (diag/embedding_norms.h), and how well E stores as a low-rank part plus a
// quantized residual (svd_embed_lowrank.cpp).
//
// Definitions (k = min(n_vocab, n_embd), sigma descending):
//   energy_i            sigma_i^2 / sum_j sigma_j^2;  cumulative_i = sum_{j<=i} energy_j
//   rank at p           the smallest r with cumulative_r >= p (p = 0.90, 0.99, 0.999)
//   effective rank      exp(-sum p_i ln p_i), p_i = sigma_i / sum_j sigma_j (Roy & Vetterli 2007)
//   stable rank         sum sigma_i^2 / sigma_max^2 = ||E||_F^2 / ||E||_2^2
//   condition number    sigma_max / sigma_min (inf when sigma_min is 0)

#include <cstdint>
#include <string>
#include <vector>

#include "core/ggml_type.h"
#include "diag/embedding_norms.h"
#include "diag/gram_eigen.h"

namespace llmctl {

struct SpectrumSummary {
  std::vector<double> energy;      // energy_i
  std::vector<double> cumulative;  // cumulative_i
  int64_t rank90 = 0, rank99 = 0, rank999 = 0;
  double effective_rank = 0;
  double stable_rank = 0;
  double condition_number = 0;  // +inf when sigma_min == 0
};

// Throws Error when sigma is empty or all zero.
SpectrumSummary summarize_spectrum(const std::vector<double>& sigma);

// Rank r stored in F16 (C = E V_r (n_vocab, r) and V_r (n_embd, r)) plus the residual
// R = E - f16(C) f16(V_r)^T in `residual_type`, against storing E directly in that type.
struct LowRankOptions {
  int64_t rank = 0;                         // 0: the 90%-energy rank
  GgmlType residual_type = GgmlType::Q4_0;  // any type quant/quantize.h writes
  int64_t max_rows = 4096;                  // rows measured (evenly spaced); 0: all
};

struct LowRankEstimate {
  bool done = false;
  std::string skipped;  // why not (e.g. n_embd not a multiple of the block size)
  int64_t rank = 0;
  GgmlType residual_type = GgmlType::Q4_0;
  double bytes = 0;            // F16 factors + quantized residual, whole matrix
  double bytes_f16 = 0;        // E in F16
  double bytes_direct = 0;     // E in residual_type
  double bits_per_weight = 0;  // bytes * 8 / (n_vocab n_embd)
  double bits_per_weight_direct = 0;
  double truncation_error = 0;      // ||E - E_r||_F / ||E||_F from the spectrum (exact)
  double reconstruction_error = 0;  // ||E - (f16 factors + dequantized residual)||_F / ||E||_F
  double direct_error = 0;          // ||E - dequant(quant(E))||_F / ||E||_F
  int64_t rows_measured = 0;        // the two errors above are over these rows
};

// `v` holds the top right singular vectors (n_embd, >= rank) column-major (gram_eigen.h
// top_columns). Never throws for a type/shape it cannot handle: sets `skipped`.
LowRankEstimate estimate_low_rank(const DenseMatrix& e, const std::vector<double>& sigma,
                                  const std::vector<double>& v, int64_t rank,
                                  const LowRankOptions& opt);

struct SvdEmbedOptions {
  SpectrumOptions spectrum;  // keep_vectors is set by analyze_embedding
  bool low_rank = true;
  LowRankOptions low_rank_options;
};

struct SvdEmbedReport {
  std::string tensor;
  GgmlType type = GgmlType::F32;
  int64_t n_rows = 0, n_cols = 0;  // n_vocab, n_embd
  Spectrum spectrum;
  SpectrumSummary summary;
  std::vector<double> norms;  // per token
  NormStats norm_stats;
  LowRankEstimate low_rank;
  double seconds_norms = 0, seconds_low_rank = 0, seconds_total = 0;
};

// The whole analysis, the Gram matrix and its eigen-decomposition (eigenvectors too for the
// low-rank estimate) by `backend`; norms and the low-rank estimate on the host. Throws Error
// (spectrum failures, bad low-rank rank).
SvdEmbedReport analyze_embedding(Backend& backend, const DenseMatrix& e,
                                 const SvdEmbedOptions& opt);

}  // namespace llmctl
