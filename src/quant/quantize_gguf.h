#pragma once
// Carries out a QuantPlan: reads every tensor of a GGUF file, converts it as planned and
// streams the new file to disk (io/gguf_stream_writer.h: a temporary file, renamed when
// complete), while measuring what each tensor lost by decoding the bytes it just wrote.
//
// Per tensor, over its n elements x and the decoded output x':
//   RMSE      sqrt(sum (x - x')^2 / n)
//   max abs   max |x - x'|
//   SNR (dB)  10 log10(sum x^2 / sum (x - x')^2); +inf when nothing was lost (copies, F32)
// Sums are accumulated in double, per chunk of rows, and merged in chunk order. Deterministic:
// chunk boundaries and merge order do not depend on the thread count and nothing in the file
// depends on a clock, so the same input and plan always give the same bytes and statistics.

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "quant/quant_plan.h"

namespace llmctl {

struct TensorError {
  int64_t n = 0;
  double sum_sq_x = 0.0;    // sum x^2
  double sum_sq_err = 0.0;  // sum (x - x')^2
  double max_abs = 0.0;     // max |x - x'|
  bool measured = false;    // false for a tensor copied without decoding (undecodable type)

  double rmse() const;
  double snr_db() const;  // +inf when sum_sq_err == 0
};

struct QuantizeProgress {
  size_t tensor = 0;  // index in plan.tensors
  size_t n_tensors = 0;
  int64_t elements_done = 0;  // over the whole file, before this call's work
  int64_t elements_total = 0;
  bool tensor_start = false;  // first call for this tensor
};

// Called before each tensor and between chunks of a large one (about 4M elements). It may
// throw (e.g. on Ctrl-C) to abandon the file: nothing is left at out_path.
using QuantizeProgressFn = std::function<void(const QuantizeProgress&)>;

// Metadata written to the new file: `in`'s keys in order with general.file_type and
// general.quantization_version (= 2, ggml's current block layouts) set.
GgufBuilder quantized_metadata(const GgufFile& in, const QuantPlan& plan);

// Importance weights by tensor name: (row length,) weights of the input columns
// (quant/importance.h builds them from an importance matrix).
using ColumnWeights = std::map<std::string, std::vector<float>>;

struct QuantizeRunOptions {
  int n_threads = 1;                          // chunks converted at once
  int64_t chunk_elements = int64_t{1} << 22;  // ~16 MiB of floats per chunk (whole rows, >= 1)
  // Tensors named here are quantized with quantize_rows' weighted search; the others (and
  // every tensor when null) exactly as without weights.
  const ColumnWeights* column_weights = nullptr;
};

// Writes the quantized file to out_path (atomically) and returns one TensorError per planned
// tensor. Throws Error naming the
// tensor, row and column of a NaN or Inf weight, FileError on an I/O failure.
std::vector<TensorError> quantize_gguf(const GgufFile& in, const QuantPlan& plan,
                                       const std::string& out_path,
                                       const QuantizeProgressFn& progress,
                                       const QuantizeRunOptions& run = {});

}  // namespace llmctl
