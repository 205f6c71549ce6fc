#pragma once
// The importance matrix: per weight, the mean square of each input column over calibration
// text, collected by the engine (`llmctl eval --save-imatrix`, through the forward observer)
// and used by `llmctl quantize --imatrix` to weight the per-block scale search, so the
// columns that carry large activations are reproduced more closely.
//
// File format: GGUF, as llama.cpp writes its imatrix files, so either tool reads the other's:
//   general.type = "imatrix"; for each weight W (its GGUF tensor name):
//     tensor "W.in_sum2"  F32 (n_cols,)   sum over observed rows of x_j^2
//     tensor "W.counts"   F32 (1,)        number of observed rows
//   plus "imatrix.datasets" (array of strings: the calibration texts) and "imatrix.chunk_count"
//   / "imatrix.chunk_size" (u32) where known.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace llmctl {

struct ImportanceMatrix {
  struct Entry {
    std::vector<double> sum_sq;  // (n_cols,): sum over observed rows of x_j^2
    int64_t n_rows = 0;          // rows (tokens) observed
  };
  std::map<std::string, Entry> entries;  // by weight name ("blk.0.attn_q.weight")
  std::vector<std::string> datasets;     // calibration text names
  int64_t chunk_count = 0;               // windows of text evaluated
  int64_t chunk_size = 0;                // tokens per window

  // Adds rows x (n_rows, n_cols) seen at the input of weight `name`. Throws Error when the
  // weight was seen before with another n_cols.
  void add(const std::string& name, const float* x, int64_t n_rows, int64_t n_cols);
  // Mean x_j^2 per column for weight `name`, or an empty vector when it was never observed.
  // Computed as llama-quantize does from a file's in_sum2 and counts, in float:
  // float(sum_j) / float(n_rows), so the same file gives the quantizers the same weights.
  // Throws Error when it was observed with a row length other than n_cols.
  std::vector<float> column_weights(const std::string& name, int64_t n_cols) const;
};

// Writes `m` as a GGUF imatrix file (format above). Throws FileError.
void save_imatrix(const std::string& path, const ImportanceMatrix& m);
// Reads a GGUF imatrix file (ours or llama.cpp's). Throws FileError for an unreadable or
// malformed file (an entry without its counts, a non-finite or negative sum, ...).
ImportanceMatrix load_imatrix(const std::string& path);

}  // namespace llmctl
