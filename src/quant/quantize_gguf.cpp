#include "quant/quantize_gguf.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <functional>
#include <limits>
#include <thread>

#include "core/error.h"
#include "io/gguf_stream_writer.h"
#include "io/gguf_writer.h"
#include "quant/dequant.h"
#include "quant/quantize.h"

namespace llmctl {

namespace {

// Bytes of `count` elements of `type` (count a whole number of blocks).
size_t span_bytes(GgmlType type, int64_t count) {
  const GgmlTypeTraits tr = ggml_traits(type);
  return static_cast<size_t>(count) / tr.block_size * tr.type_size;
}

// Throws the tensor/row/column of the first NaN or Inf in x[0..rows*row_len).
void check_finite(const TensorPlan& p, const float* x, int64_t first_row, int64_t rows,
                  int64_t row_len) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < row_len; ++c) {
      const float v = x[r * row_len + c];
      if (!std::isfinite(v))
        throw Error(fmt::format("tensor '{}' has {} at row {}, column {}; cannot write it as {}",
                                p.name, v, first_row + r, c, ggml_type_name(p.chosen)),
                    "check the source checkpoint: a NaN or Inf weight usually means a broken "
                    "conversion or an overflowed fine-tune");
    }
}

void accumulate(TensorError& e, const float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double xv = x[i];
    const double d = xv - static_cast<double>(y[i]);
    e.sum_sq_x += xv * xv;
    e.sum_sq_err += d * d;
    e.max_abs = std::max(e.max_abs, std::fabs(d));
  }
  e.n += n;
}

// One worker's buffers and the result of its current chunk.
struct Chunk {
  std::vector<float> x, back;
  std::vector<uint8_t> bytes;
  TensorError err;
  size_t n_bytes = 0;
  std::exception_ptr error;
};

// Rows [r0, r0 + rows) of a tensor: decode the source, check, encode, and decode the written
// bytes again for the error statistics. Never throws (the error is kept in c.error).
void convert_chunk(const GgufTensorInfo& src, const TensorPlan& p, const float* col_weights,
                   int64_t r0, int64_t rows, Chunk& c) {
  try {
    const int64_t row_len = p.shape[0];
    const int64_t count = rows * row_len;
    c.err = TensorError{};
    dequantize_row(src.type, src.data + span_bytes(src.type, r0 * row_len), c.x.data(), count);
    check_finite(p, c.x.data(), r0, rows, row_len);
    quantize_rows(p.chosen, c.x.data(), c.bytes.data(), rows, row_len, col_weights);
    dequantize_row(p.chosen, c.bytes.data(), c.back.data(), count);
    accumulate(c.err, c.x.data(), c.back.data(), count);
    c.n_bytes = span_bytes(p.chosen, count);
  } catch (...) {
    c.error = std::current_exception();
  }
}

// Converts one tensor in chunks of rows, n_threads chunks at a time. Chunk boundaries do not
// depend on the thread count and results are merged in chunk order, so the bytes and the
// statistics are the same for any number of threads.
TensorError convert_tensor(const GgufTensorInfo& src, const TensorPlan& p, GgufStreamWriter& out,
                           QuantizeProgress& prog, const QuantizeProgressFn& progress,
                           std::vector<Chunk>& workers, int64_t chunk_elements,
                           const float* col_weights) {
  TensorError err;
  err.measured = true;
  const int64_t row_len = p.shape[0];
  const int64_t n_rows = p.n_elements / row_len;
  const int64_t chunk_rows = std::max<int64_t>(1, chunk_elements / row_len);
  const auto chunk_elems = static_cast<size_t>(std::min(n_rows, chunk_rows) * row_len);
  for (Chunk& c : workers) {
    const size_t need = span_bytes(p.chosen, static_cast<int64_t>(chunk_elems));
    if (c.x.size() < chunk_elems) {
      c.x.resize(chunk_elems);
      c.back.resize(chunk_elems);
    }
    if (c.bytes.size() < need) c.bytes.resize(need);
  }
  const auto n_workers = static_cast<int64_t>(workers.size());
  for (int64_t r0 = 0; r0 < n_rows; r0 += chunk_rows * n_workers) {
    if (r0 > 0 && progress) progress(prog);
    std::vector<std::thread> threads;
    int64_t used = 0;
    for (int64_t k = 0; k < n_workers && r0 + k * chunk_rows < n_rows; ++k, ++used) {
      const int64_t first = r0 + k * chunk_rows;
      const int64_t rows = std::min(chunk_rows, n_rows - first);
      Chunk& c = workers[static_cast<size_t>(k)];
      c.error = nullptr;
      if (k == 0) continue;  // the calling thread takes chunk 0 below
      threads.emplace_back(convert_chunk, std::cref(src), std::cref(p), col_weights, first, rows,
                           std::ref(c));
    }
    convert_chunk(src, p, col_weights, r0, std::min(chunk_rows, n_rows - r0), workers[0]);
    for (std::thread& t : threads) t.join();
    for (int64_t k = 0; k < used; ++k) {
      const Chunk& c = workers[static_cast<size_t>(k)];
      if (c.error) std::rethrow_exception(c.error);  // the first bad chunk in row order
      err.n += c.err.n;
      err.sum_sq_x += c.err.sum_sq_x;
      err.sum_sq_err += c.err.sum_sq_err;
      err.max_abs = std::max(err.max_abs, c.err.max_abs);
      out.write(c.bytes.data(), c.n_bytes);
      prog.elements_done += c.err.n;
    }
    prog.tensor_start = false;
  }
  return err;
}

}  // namespace

double TensorError::rmse() const {
  return n > 0 ? std::sqrt(sum_sq_err / static_cast<double>(n)) : 0.0;
}

double TensorError::snr_db() const {
  if (sum_sq_err == 0.0) return std::numeric_limits<double>::infinity();
  return 10.0 * std::log10(sum_sq_x / sum_sq_err);
}

GgufBuilder quantized_metadata(const GgufFile& in, const QuantPlan& plan) {
  GgufBuilder meta;
  for (const GgufKV& kv : in.metadata()) meta.set(kv.key, kv.value);
  meta.set("general.quantization_version", gguf_value::u32(2));
  meta.set("general.file_type", gguf_value::u32(plan.file_type));
  return meta;
}

std::vector<TensorError> quantize_gguf(const GgufFile& in, const QuantPlan& plan,
                                       const std::string& out_path,
                                       const QuantizeProgressFn& progress,
                                       const QuantizeRunOptions& run) {
  LLMCTL_ASSERT(plan.tensors.size() == in.tensors().size());
  std::vector<Chunk> workers(static_cast<size_t>(std::max(1, run.n_threads)));
  std::vector<GgufTensorDecl> decls;
  QuantizeProgress prog;
  prog.n_tensors = plan.tensors.size();
  for (const TensorPlan& p : plan.tensors) {
    decls.push_back(GgufTensorDecl{p.name, p.chosen, p.shape});
    prog.elements_total += p.n_elements;
  }
  GgufStreamWriter out(out_path, quantized_metadata(in, plan), std::move(decls));

  std::vector<TensorError> errors;
  for (size_t i = 0; i < plan.tensors.size(); ++i) {
    const TensorPlan& p = plan.tensors[i];
    const GgufTensorInfo& src = in.tensors()[i];
    LLMCTL_ASSERT(src.name == p.name && src.data != nullptr);
    prog.tensor = i;
    prog.tensor_start = true;
    if (progress) progress(prog);
    if (p.copy) {
      out.write(src.data, src.n_bytes);
      TensorError e;
      e.n = p.n_elements;
      e.measured = can_dequantize(p.src_type);
      errors.push_back(e);
      prog.elements_done += p.n_elements;
    } else {
      const float* cw = nullptr;
      if (run.column_weights != nullptr) {
        const auto it = run.column_weights->find(p.name);
        if (it != run.column_weights->end()) {
          LLMCTL_ASSERT(static_cast<int64_t>(it->second.size()) == p.shape[0]);
          cw = it->second.data();
        }
      }
      errors.push_back(
          convert_tensor(src, p, out, prog, progress, workers, run.chunk_elements, cw));
    }
    out.end_tensor();
  }
  out.commit();
  return errors;
}

}  // namespace llmctl
