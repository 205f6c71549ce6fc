#pragma once
// Embedding matrices as dense float32, and statistics of their per-token L2 norms against the
// token id (svd-embed, tokenize --norms).
//
//   E (n_rows = n_vocab, n_cols = n_embd) row-major; row t is token t's embedding
//   norm_t = ||E[t, :]||_2

#include <cstdint>
#include <string>
#include <vector>

#include "core/ggml_type.h"

namespace llmctl {

class GgufFile;
struct GgufTensorInfo;

struct DenseMatrix {
  std::string name;               // tensor name, for messages
  GgmlType type = GgmlType::F32;  // the stored type it was dequantized from
  int64_t n_rows = 0, n_cols = 0;
  std::vector<float> data;  // (n_rows, n_cols) row-major
};

// Dequantizes a 2-D weight stored in ggml order (rows of n_cols contiguous elements of `type`,
// each row a whole number of blocks) into a dense float32 matrix. Throws Error for a type
// quant/dequant cannot read or a row length that is not a whole number of blocks.
DenseMatrix dequantize_matrix(const std::string& name, GgmlType type, int64_t n_cols,
                              int64_t n_rows, const void* data);

// norm_t for every row, in float64.
std::vector<double> row_norms(const DenseMatrix& m);

// The 2-D tensor `name` of a GGUF file. Throws FileError when it is absent (with `hint`) or
// not 2-D.
const GgufTensorInfo& require_matrix(const GgufFile& f, const std::string& name,
                                     const std::string& hint);
// dequantize_matrix of a GGUF tensor.
DenseMatrix dequantize_matrix(const GgufTensorInfo& t);
// norm_t of every row of a GGUF tensor, dequantizing one row at a time (no full copy).
std::vector<double> row_norms(const GgufTensorInfo& t);

struct NormStats {
  int64_t n = 0;
  double mean = 0, sd = 0;
  double min = 0, max = 0;
  int64_t argmin = 0, argmax = 0;  // token ids
  std::vector<double> deciles;     // 11 values: p0, p10, ..., p100 of the norms (linear interp.)
  // Mean norm of the tokens in each tenth of the id range: bucket b holds ids
  // [b n / 10, (b + 1) n / 10). Fewer than 10 buckets when n < 10.
  std::vector<double> id_decile_means;
  std::vector<int64_t> id_decile_starts;  // first id of each bucket
  double pearson = 0;                     // correlation of norm with id
  double spearman = 0;                    // rank correlation (ties get their average rank)
  double slope_per_1k = 0;                // least-squares slope of norm on id, per 1000 ids
  // Whether the norms grow with the token id: spearman >= kTrendThreshold ("grows"),
  // <= -kTrendThreshold ("shrinks"), else "flat".
  std::string trend;
};
constexpr double kTrendThreshold = 0.1;

// Statistics of norms indexed by token id. Throws Error when `norms` is empty.
NormStats norm_statistics(const std::vector<double>& norms);

// Percentage of `values` that are <= v (0..100); `values` need not be sorted.
double percentile_of(const std::vector<double>& values, double v);

}  // namespace llmctl
