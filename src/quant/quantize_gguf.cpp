#include "quant/quantize_gguf.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "io/gguf_stream_writer.h"
#include "io/gguf_writer.h"
#include "quant/dequant.h"
#include "quant/quantize.h"

namespace llmctl {

namespace {

constexpr int64_t kChunkElements = int64_t{1} << 22;  // 16 MiB of floats per buffer

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

// Converts one tensor chunk by chunk: decode rows of the source, check, encode, write, and
// decode the written bytes again for the error statistics.
TensorError convert_tensor(const GgufTensorInfo& src, const TensorPlan& p, GgufStreamWriter& out,
                           QuantizeProgress& prog, const QuantizeProgressFn& progress) {
  TensorError err;
  err.measured = true;
  const int64_t row_len = p.shape[0];
  const int64_t n_rows = p.n_elements / row_len;
  const int64_t chunk_rows = std::max<int64_t>(1, kChunkElements / row_len);
  std::vector<float> x(static_cast<size_t>(std::min(n_rows, chunk_rows) * row_len));
  std::vector<float> back(x.size());
  std::vector<uint8_t> bytes(span_bytes(p.chosen, static_cast<int64_t>(x.size())));
  for (int64_t r0 = 0; r0 < n_rows; r0 += chunk_rows) {
    if (r0 > 0 && progress) progress(prog);
    const int64_t rows = std::min(chunk_rows, n_rows - r0);
    const int64_t count = rows * row_len;
    dequantize_row(src.type, src.data + span_bytes(src.type, r0 * row_len), x.data(), count);
    check_finite(p, x.data(), r0, rows, row_len);
    quantize_row(p.chosen, x.data(), bytes.data(), count);
    dequantize_row(p.chosen, bytes.data(), back.data(), count);
    accumulate(err, x.data(), back.data(), count);
    out.write(bytes.data(), span_bytes(p.chosen, count));
    prog.elements_done += count;
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
                                       const QuantizeProgressFn& progress) {
  LLMCTL_ASSERT(plan.tensors.size() == in.tensors().size());
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
      errors.push_back(convert_tensor(src, p, out, prog, progress));
    }
    out.end_tensor();
  }
  out.commit();
  return errors;
}

}  // namespace llmctl
